import { rpc } from '../../../scripts/bench/lib/mcp.ts';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** pollUntil, checking every 100 ms by default; throws on timeout. */
export { pollUntil as waitFor } from '../../../scripts/lib/poll-until.ts';

export interface PollLog {
  taskId: string;
  finalStatus?: string;
  polls: number;
  /** Network errors (refused, reset) while polling, with when they happened. */
  networkErrors: Array<{ at: number; error: string }>;
  /** HTTP 5xx answers. */
  serverErrors: Array<{ at: number; status: number; body: string }>;
  /** JSON-RPC errors in a 2xx answer. */
  rpcErrors: Array<{ at: number; error: string }>;
}

/**
 * A client that polls its task on the 2026 wire until it ends, riding out whatever happens
 * to the gateway meanwhile (it retries on every failure, as a real client would), and keeps
 * a log of what it saw.
 */
export async function pollToEnd(
  mcpUrl: () => string,
  token: string,
  taskId: string,
  o: { everyMs?: number; timeoutMs?: number } = {},
): Promise<PollLog> {
  const log: PollLog = { taskId, polls: 0, networkErrors: [], serverErrors: [], rpcErrors: [] };
  const until = Date.now() + (o.timeoutMs ?? 180_000);
  while (Date.now() < until) {
    log.polls++;
    try {
      const r = await rpc(
        mcpUrl(),
        token,
        'tasks/get',
        { taskId },
        { signal: AbortSignal.timeout(15_000) },
      );
      if (r.status >= 500)
        log.serverErrors.push({
          at: Date.now(),
          status: r.status,
          body: JSON.stringify(r.body).slice(0, 200),
        });
      else if (r.body?.error)
        log.rpcErrors.push({ at: Date.now(), error: JSON.stringify(r.body.error).slice(0, 200) });
      else if (r.body?.result?.status && r.body.result.status !== 'working') {
        log.finalStatus = r.body.result.status;
        return log;
      }
    } catch (error) {
      log.networkErrors.push({
        at: Date.now(),
        error: String((error as Error).cause ?? (error as Error).message).slice(0, 120),
      });
    }
    await sleep(o.everyMs ?? 100);
  }
  return log;
}
