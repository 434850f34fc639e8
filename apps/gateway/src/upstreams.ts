import { clientCredentialsToken, createTokenExchanger } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import type { ToolRegistry } from '@mtg/tools';
import { loadUpstreams, startUpstreamHub, UpstreamError, type UpstreamHub } from '@mtg/upstreams';
import type { GatewayConfig } from './config.ts';

/**
 * The gateway's upstreams (UPSTREAMS_FILE): its own client-credentials token lists their
 * tools; an instant call exchanges the caller's token (RFC 8693, the gateway as client) for
 * the upstream's audience, so the caller's token never leaves the gateway.
 */
export async function startGatewayUpstreams(
  config: GatewayConfig,
  logger: Logger,
  tools: ToolRegistry,
): Promise<UpstreamHub | undefined> {
  const upstreams = loadUpstreams(config.UPSTREAMS_FILE);
  if (!upstreams.length) return undefined;
  const serviceTokens = new Map<string, () => Promise<string>>();
  const exchanger = createTokenExchanger({
    issuer: config.issuer,
    clientId: config.CLIENT_ID,
    clientSecret: config.CLIENT_SECRET,
    style: config.EXCHANGE_STYLE,
  });
  return startUpstreamHub({
    upstreams,
    databaseUrl: config.DATABASE_URL,
    databaseRole: config.DATABASE_ROLE,
    logger,
    ownLong: tools.long,
    serviceToken(audience) {
      let get = serviceTokens.get(audience);
      if (!get) {
        get = clientCredentialsToken({
          issuer: config.issuer,
          clientId: config.CLIENT_ID,
          clientSecret: config.CLIENT_SECRET,
          resource: audience,
        });
        serviceTokens.set(audience, get);
      }
      return get();
    },
    async exchange(callerToken, audience, scope) {
      const outcome = await exchanger.exchange({
        subjectToken: callerToken,
        target: audience,
        scope: [scope],
        ttlSeconds: 300,
      });
      if (!outcome.ok) {
        throw new UpstreamError(
          'upstream_unauthorized',
          audience,
          `the authorization server refused a token for the upstream: ${outcome.description}`,
        );
      }
      return outcome.token.accessToken;
    },
  });
}
