import type { Pool } from 'pg';
import type { Logger } from '@mtg/log';
import type { ServedTool } from '@mtg/runner';
import {
  createUpstreamGuard,
  upstreamQueue,
  upstreamToolsFrom,
  type UpstreamConfig,
  type UpstreamGuard,
} from '@mtg/upstreams';

/** How often a worker re-reads the upstream catalogue the gateways keep. */
const CATALOGUE_REFRESH_MS = 2000;

/**
 * The worker's side of the upstreams: their task-mode tools, as the gateways stored them in
 * PostgreSQL, join the tools this worker serves (same rows, same fingerprints as the
 * gateway's), and are re-read every couple of seconds; one queue per upstream.
 */
export async function startWorkerUpstreams(
  list: readonly UpstreamConfig[],
  pool: Pool,
  served: Map<string, ServedTool>,
  logger: Logger,
) {
  if (!list.length) return undefined;
  const configs = new Map<string, UpstreamConfig>(list.map((u) => [u.name, u]));
  const guards = new Map<string, UpstreamGuard>(
    list.map((u) => [
      u.name,
      createUpstreamGuard({
        upstream: u.name,
        maxConcurrency: u.maxConcurrency,
        breakerThreshold: u.breakerThreshold,
        breakerCooldownMs: u.breakerCooldownMs,
      }),
    ]),
  );
  // Each upstream task tool this worker serves, and the queue of its upstream.
  const mine = new Map<string, string>();
  const load = async () => {
    const tools = await upstreamToolsFrom(pool, list, logger);
    for (const name of mine.keys()) {
      if (!tools.long.has(name)) {
        served.delete(name);
        mine.delete(name);
      }
    }
    for (const [name, e] of tools.long) {
      if (served.has(name) && !mine.has(name)) continue; // a pack's tool keeps its name
      served.set(name, { tool: e.tool, fingerprint: e.fingerprint });
      mine.set(name, e.queue);
    }
  };
  await load();
  const timer = setInterval(() => {
    load().catch((error: Error) =>
      logger.warn('upstream catalogue read failed', { error: error.message }),
    );
  }, CATALOGUE_REFRESH_MS);
  timer.unref();
  return {
    configs,
    guards,
    queues: list.map((u) => upstreamQueue(u.name)),
    /** The queue of an upstream task tool this worker serves (undefined: not one of them). */
    queueOf: (tool: string) => mine.get(tool),
    stop: () => clearInterval(timer),
  };
}
