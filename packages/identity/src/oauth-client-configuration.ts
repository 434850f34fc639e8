import * as oidc from 'openid-client';

/**
 * A lazily discovered openid-client configuration for one confidential client of one
 * issuer, cached; a failed discovery is retried on the next call instead of being cached.
 * Plain http is allowed only because the dev IdP runs on loopback http.
 */
export function oauthClientConfiguration(options: {
  issuer: string;
  clientId: string;
  clientSecret: string;
}) {
  let configuration: Promise<oidc.Configuration> | undefined;
  return () => {
    configuration ??= oidc
      .discovery(
        new URL(options.issuer),
        options.clientId,
        options.clientSecret,
        oidc.ClientSecretBasic(),
        {
          ...(options.issuer.startsWith('http://')
            ? { execute: [oidc.allowInsecureRequests] }
            : {}),
        },
      )
      .catch((error: unknown) => {
        configuration = undefined;
        throw error;
      });
    return configuration;
  };
}
