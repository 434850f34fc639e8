import pg from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import { rpc, startTask } from '../../../scripts/bench/lib/mcp.ts';
import { coreWire, jobToolsWire, type Wire } from '../../support/wires.ts';
import { sleep } from './clients.ts';

/** What one start attempt got back. */
export interface StartAttempt {
  wire: string;
  at: number;
  ms: number;
  id?: string;
  /** HTTP status of a failed start (0: no answer: refused, reset, timed out). */
  status?: number;
  error?: string;
  /**
   * The documented outage answer (HTTP 503, or in-band JSON-RPC -32000 / isError with reason
   * "unavailable" when the connection broke midway), as opposed to anything else.
   */
  unavailable?: boolean;
}

const UNAVAILABLE = /Temporarily unavailable|"reason":"unavailable"/;

/** The SDK's StreamableHTTPError carries the HTTP status as its `code`. */
const statusOf = (e: unknown): number => {
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : 0;
};

/**
 * Load through a failover: starts on all three wires (2026 extension, core tasks, job
 * tools), polls of started tasks, and audit appends outside any task, each loop recording
 * what the client was told. `stop()` ends the loops; the records are what the checks use.
 */
export function startFailoverLoad(o: {
  mcpUrl: string;
  token: string;
  /** Owner URL through the router, for the audit appends. */
  databaseUrl: string;
  count: number;
  pauseMs?: number;
}) {
  const starts: StartAttempt[] = [];
  const polls: Array<{ at: number; status: number; unavailable: boolean; internal: boolean }> = [];
  const appended: string[] = [];
  const appendFailures: Array<{ at: number; error: string }> = [];
  let running = true;
  const pause = o.pauseMs ?? 250;
  const args = (i: number, wire: string) => ({
    collection: `ha-${wire}-${i}`,
    count: o.count,
    patch: { i },
  });

  const ext = async (i: number) => {
    const t = Date.now();
    try {
      const id = await startTask(o.mcpUrl, o.token, 'bulk_update_records', args(i, 'ext'));
      starts.push({ wire: 'ext', at: t, ms: Date.now() - t, id });
    } catch (e) {
      const m = /HTTP (\d+)/.exec(String((e as Error).message));
      starts.push({
        wire: 'ext',
        at: t,
        ms: Date.now() - t,
        status: m ? Number(m[1]) : 0,
        error: String((e as Error).message).slice(0, 200),
        unavailable: UNAVAILABLE.test(String((e as Error).message)),
      });
    }
  };
  const sdk = (wire: Wire, label: string) => async (i: number) => {
    const t = Date.now();
    try {
      const id = await wire.start(o.token, 'bulk_update_records', args(i, label));
      starts.push({ wire: label, at: t, ms: Date.now() - t, id });
    } catch (e) {
      starts.push({
        wire: label,
        at: t,
        ms: Date.now() - t,
        status: statusOf(e),
        error: String((e as Error).message).slice(0, 200),
        unavailable: UNAVAILABLE.test(String((e as Error).message)),
      });
    }
  };
  const starters: Array<[string, (i: number) => Promise<void>]> = [
    ['ext', ext],
    ['core', sdk(coreWire(o.mcpUrl), 'core')],
    ['job', sdk(jobToolsWire(o.mcpUrl), 'job')],
  ];
  const loops = starters.map(async ([, start]) => {
    for (let i = 0; running; i++) {
      await start(i);
      await sleep(pause);
    }
  });

  loops.push(
    (async () => {
      while (running) {
        const ids = starts.filter((s) => s.id).map((s) => s.id!);
        const id = ids[Math.floor(Math.random() * ids.length)];
        if (id) {
          try {
            const r = await rpc(
              o.mcpUrl,
              o.token,
              'tasks/get',
              { taskId: id },
              { signal: AbortSignal.timeout(15_000) },
            );
            const text = JSON.stringify(r.body);
            polls.push({
              at: Date.now(),
              status: r.status,
              unavailable: UNAVAILABLE.test(text),
              internal: r.status >= 500 && r.status !== 503 ? true : /-32603/.test(text),
            });
          } catch {
            polls.push({ at: Date.now(), status: 0, unavailable: false, internal: false });
          }
        }
        await sleep(100);
      }
    })(),
  );

  // Audit appends as the gateway and workers make them outside a task (group commit).
  const pool = new pg.Pool({
    connectionString: o.databaseUrl,
    max: 4,
    connectionTimeoutMillis: 2000,
  });
  pool.on('error', () => {}); // an idle client's session died with its server
  const tag = `ha-${process.pid}-${Date.now()}`;
  loops.push(
    ...[0, 1].map(async (w) => {
      for (let i = 0; running; i++) {
        const correlationId = `${tag}-${w}-${i}`;
        try {
          await appendAuditGrouped(pool, {
            type: 'task.step_completed',
            taskId: 'a'.repeat(32),
            tenant: 'ha-audit',
            subject: 'ha',
            client: 'ha-load',
            tool: 'bulk_update_records',
            correlationId,
            data: { step: `append:${w}:${i}` },
          } as never);
          appended.push(correlationId);
        } catch (e) {
          appendFailures.push({
            at: Date.now(),
            error: String((e as Error).message).slice(0, 120),
          });
          await sleep(200);
        }
        await sleep(50);
      }
    }),
  );

  return {
    starts,
    polls,
    appended,
    appendFailures,
    tag,
    async stop() {
      running = false;
      await Promise.all(loops);
      await pool.end().catch(() => {});
    },
  };
}
