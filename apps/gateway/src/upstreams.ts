import { nowMs } from '@mtg/clock';
import { createHash } from 'node:crypto';
import { clientCredentialsToken, createTokenExchanger } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import type { ToolRegistry } from '@mtg/tools';
import {
  loadUpstreams,
  SESSION_EXPIRY_MARGIN_MS,
  startUpstreamHub,
  UpstreamError,
  type UpstreamHub,
} from '@mtg/upstreams';
import type { GatewayConfig } from './config.ts';

/** Exchanged upstream tokens kept per gateway process (oldest dropped first). */
const EXCHANGE_CACHE_SIZE = 10_000;

/**
 * The gateway's upstreams (UPSTREAMS_FILE): its own client-credentials token lists their
 * tools; an instant call exchanges the caller's token (RFC 8693, the gateway as client) for
 * the upstream's audience, so the caller's token never leaves the gateway.
 */
export async function startGatewayUpstreams(
  config: GatewayConfig,
  logger: Logger,
  tools: ToolRegistry,
  /** The gateway's own tools (whoami, the job tools): no upstream tool may take their names. */
  ownToolNames: readonly string[],
  /** The gateway's clock (tests move it): when an exchanged token counts as expired. */
  now: () => number = nowMs,
): Promise<UpstreamHub | undefined> {
  const upstreams = loadUpstreams(config.UPSTREAMS_FILE);
  if (!upstreams.length) return undefined;
  const serviceTokens = new Map<string, () => Promise<string>>();
  const exchanged = new Map<string, { token: string; expiresAt: number }>();
  const inFlight = new Map<string, Promise<{ token: string; expiresAt: number }>>();
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
    reserved: [...ownToolNames, ...tools.names()],
    callsPerMinute: config.RATE_LIMIT_UPSTREAM_CALLS_PER_MINUTE,
    now,
    serviceToken(audience) {
      let get = serviceTokens.get(audience);
      if (!get) {
        get = clientCredentialsToken({
          issuer: config.issuer,
          clientId: config.CLIENT_ID,
          clientSecret: config.CLIENT_SECRET,
          resource: audience,
          clock: () => new Date(now()),
        });
        serviceTokens.set(audience, get);
      }
      return get();
    },
    async exchange(callerToken, audience, scope, options = {}) {
      // One exchange per caller token, upstream and scope while the result is fresh: the
      // caller's token was verified (and its principal checked for revocation) by this request.
      const key = createHash('sha256')
        .update(`${audience}\n${scope}\n${callerToken}`)
        .digest('hex');
      const cached = exchanged.get(key);
      // The margin is the session pool's: a session stops being used with its token.
      if (cached && !options.fresh && cached.expiresAt - SESSION_EXPIRY_MARGIN_MS > now()) {
        return cached;
      }
      // Concurrent calls of one caller share one exchange, and so one token and one upstream
      // session; a forced one (after a 401) is shared only with other forced ones.
      const flightKey = `${key}\n${options.fresh ? 'fresh' : ''}`;
      let flight = inFlight.get(flightKey);
      if (!flight) {
        flight = (async () => {
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
          if (exchanged.size >= EXCHANGE_CACHE_SIZE) {
            exchanged.delete(exchanged.keys().next().value!);
          }
          const fresh = { token: outcome.token.accessToken, expiresAt: outcome.token.expiresAt };
          exchanged.set(key, fresh);
          return fresh;
        })().finally(() => inFlight.delete(flightKey));
        inFlight.set(flightKey, flight);
      }
      return flight;
    },
  });
}
