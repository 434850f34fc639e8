import * as oidc from 'openid-client';
import { LOGIN_SCOPES, type ConsoleRole } from './roles.ts';

export interface OidcOptions {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  /** The console's own redirect URI, `<console>/auth/callback`. */
  redirectUri: string;
  /** The resource the token is for: the gateway, so operator actions can use it. */
  resource: string;
}

/**
 * Authorization code + PKCE (S256) against the configured IdP, through openid-client. The
 * IdP is discovered on first use, so the console may start before it.
 */
export function createOidcClient(options: OidcOptions) {
  let configuration: Promise<oidc.Configuration> | undefined;
  const config = () => {
    configuration ??= oidc
      .discovery(
        new URL(options.issuer),
        options.clientId,
        undefined,
        options.clientSecret ? oidc.ClientSecretPost(options.clientSecret) : oidc.None(),
        // The dev IdP speaks plain http on loopback.
        new URL(options.issuer).protocol === 'http:'
          ? { execute: [oidc.allowInsecureRequests] }
          : undefined,
      )
      .catch((error: unknown) => {
        configuration = undefined;
        throw error;
      });
    return configuration;
  };

  return {
    /** Where to send the browser, and what to remember until it comes back. */
    async begin(role: ConsoleRole, extraScopes: readonly string[] = []) {
      const codeVerifier = oidc.randomPKCECodeVerifier();
      const state = oidc.randomState();
      const url = oidc.buildAuthorizationUrl(await config(), {
        redirect_uri: options.redirectUri,
        scope: ['openid', LOGIN_SCOPES[role], ...extraScopes].filter(Boolean).join(' '),
        resource: options.resource,
        code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
        state,
      });
      return { url, codeVerifier, state };
    },
    /** Redeems the code of the callback URL; throws on a wrong state or a refused code. */
    async complete(callbackUrl: URL, login: { codeVerifier: string; state: string }) {
      const tokens = await oidc.authorizationCodeGrant(
        await config(),
        callbackUrl,
        { pkceCodeVerifier: login.codeVerifier, expectedState: login.state },
        { resource: options.resource },
      );
      return tokens.access_token;
    },
    async jwksUri(): Promise<string> {
      const uri = (await config()).serverMetadata().jwks_uri;
      if (!uri) throw new Error(`the IdP ${options.issuer} publishes no jwks_uri`);
      return uri;
    },
  };
}

export type OidcClient = ReturnType<typeof createOidcClient>;
