import type { Pool } from 'pg';
import type { Logger } from '@mtg/log';
import type { ServedTool } from '@mtg/runner';
import type { TaskEvents } from '@mtg/tasks';
import {
  CATALOGUE_CHANNEL,
  createUpstreamGuard,
  upstreamQueue,
  upstreamToolsFrom,
  type UpstreamConfig,
  type UpstreamGuard,
} from '@mtg/upstreams';

/**
 * How often a worker re-reads the upstream catalogue besides when told it changed: for a
 * notification missed while its LISTEN session reconnected.
 */
export const CATALOGUE_SAFETY_REFRESH_MS = 30_000;

/**
 * The worker's side of the upstreams: their task-mode tools, as the gateways stored them in
 * PostgreSQL, join the tools this worker serves (same rows, same fingerprints as the
 * gateway's), and are re-read when a gateway's listing changed them (CATALOGUE_CHANNEL, once
 * `listen` is given the worker's notifications) and every `refreshMs`; one queue per
 * upstream. An idle worker so reads nothing while nothing changes: it re-read the catalogue
 * every 2 s before, five statements per 10 s in each idle worker.
 */
export async function startWorkerUpstreams(
  list: readonly UpstreamConfig[],
  pool: Pool,
  served: Map<string, ServedTool>,
  logger: Logger,
  refreshMs = CATALOGUE_SAFETY_REFRESH_MS,
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
  // One read at a time; a change told meanwhile is read once more after it.
  let reading: Promise<void> | undefined;
  let again = false;
  const reload = (): void => {
    if (reading) {
      again = true;
      return;
    }
    reading = load()
      .catch((error: Error) => {
        logger.warn('upstream catalogue read failed', { error: error.message });
      })
      .finally(() => {
        reading = undefined;
        if (again) {
          again = false;
          reload();
        }
      });
  };
  await load();
  const timer = setInterval(reload, refreshMs);
  timer.unref();
  let off: (() => void) | undefined;
  return {
    /** Re-reads the catalogue whenever a gateway's listing changed it (and once now, for a
     * change made between the first read and the LISTEN). */
    listen(events: TaskEvents) {
      off = events.on(CATALOGUE_CHANNEL, reload);
      reload();
    },
    configs,
    guards,
    queues: list.map((u) => upstreamQueue(u.name)),
    /** The queue of an upstream task tool this worker serves (undefined: not one of them). */
    queueOf: (tool: string) => mine.get(tool),
    stop: () => {
      clearInterval(timer);
      off?.();
    },
  };
}
