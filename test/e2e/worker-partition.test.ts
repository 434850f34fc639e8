// A worker that reaches its targets but not PostgreSQL (its database connections
// black-holed mid-step) keeps running, and its lease expires: another worker takes the task
// over. The first must stop writing before its lease could have run out (a local deadline
// from its last renewal), so that at no instant do two workers write for one task; once the
// partition heals its journal writes are refused, and the task completes once.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { jobToolsWire } from '../support/wires.ts';

/** One write a worker sent, as the downstream's front door saw it. */
interface Seen {
  worker: string;
  key: string;
  taskId: string;
  arrivedAt: number;
  /** When it was passed on to the downstream (the write happened from then on). */
  forwardedAt?: number;
  /** When the downstream answered (the write ended). */
  answeredAt?: number;
  /** The worker gave up on it before it was passed on. */
  abandonedAt?: number;
}

/**
 * A recording front for the downstream, one per worker: every POST is logged with its times
 * and passed on; `holdMs` keeps a request that long first (a slow network or target) and
 * passes it on only if the worker is still waiting for it.
 */
async function recordingFront(worker: string, downstreamUrl: string, seen: Seen[]) {
  let holdMs = 0;
  const forward = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const entry: Seen | undefined =
      req.method === 'POST'
        ? {
            worker,
            key: String(req.headers['idempotency-key'] ?? ''),
            taskId: String(req.headers['x-task-id'] ?? ''),
            arrivedAt: Date.now(),
          }
        : undefined;
    if (entry) seen.push(entry);
    let gone = false;
    res.on('close', () => {
      gone = true;
    });
    if (entry && holdMs > 0) {
      await new Promise((r) => setTimeout(r, holdMs));
      if (gone || req.socket.destroyed) {
        entry.abandonedAt = Date.now();
        return;
      }
    }
    if (entry) entry.forwardedAt = Date.now();
    const headers = { ...req.headers } as Record<string, string>;
    delete headers.host;
    delete headers['content-length'];
    const answer = await fetch(new URL(req.url!, downstreamUrl), {
      method: req.method!,
      headers,
      ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
    });
    const body = Buffer.from(await answer.arrayBuffer());
    if (entry) entry.answeredAt = Date.now();
    res.writeHead(answer.status, {
      'content-type': answer.headers.get('content-type') ?? 'application/json',
    });
    res.end(body);
  };
  // A target that cannot be reached resets the worker's connection, as a network would,
  // rather than rejecting where node's http server never looks.
  const server = http.createServer((req, res) => {
    forward(req, res).catch((error: unknown) => res.destroy(error as Error));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hold(ms: number) {
      holdMs = ms;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const LEASE_MS = 2000;
let stack: Stack;
let proxy: TcpProxy;
const seen: Seen[] = [];
let fronts: Array<Awaited<ReturnType<typeof recordingFront>>> = [];

beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '0' } });
  const db = new URL(stack.db.url);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
});
afterAll(async () => {
  proxy?.heal();
  await stack?.close();
  await proxy?.close();
  for (const f of fronts) await f.close();
});

test('a worker cut off from PostgreSQL mid-step stops writing before its lease could expire; the worker that takes over never writes at the same time; the task completes once', async () => {
  const frontA = await recordingFront('a', stack.downstreamUrl, seen);
  const frontB = await recordingFront('b', stack.downstreamUrl, seen);
  fronts = [frontA, frontB];
  const common = {
    WORKER_LEASE_MS: String(LEASE_MS),
    DOWNSTREAM_RESOURCE: stack.downstreamUrl,
    DOWNSTREAM_RETRIES: '0',
  };
  const a = await stack.addWorker({
    ...common,
    WORKER_ID: 'partition-a',
    DATABASE_URL: proxy.via(stack.db.logins.worker),
    DOWNSTREAM_URL: frontA.url,
  });
  // A's first write is slow to land: far longer than the lease.
  frontA.hold(LEASE_MS * 4);
  const token = await stack.token('pia', 'acme');
  const taskId = await jobToolsWire(stack.mcpUrl).start(token, 'bulk_update_records', {
    collection: 'partition',
    count: 1500, // three batches
    patch: { cut: true },
  });
  await pollUntil(
    async () => seen.some((s) => s.worker === 'a' && s.taskId === taskId),
    (x) => x,
    20_000,
    20,
    "worker A's first write arriving",
  );
  // A is mid-step, its write on the wire: cut it off from PostgreSQL. The server drops A's
  // sessions after 3 s (as its tcp_keepalives would), which frees A's session locks.
  const cutAt = Date.now();
  proxy.blackhole({ serverDropsAfterMs: 3000 });
  frontA.hold(0);
  const b = await stack.addWorker({
    ...common,
    WORKER_ID: 'partition-b',
    DOWNSTREAM_URL: frontB.url,
  });
  await pollUntil(
    () =>
      sql<{ status: string }>(stack.db.url, `SELECT status FROM app.tasks WHERE id = $1`, [taskId]),
    (r) => r[0]?.status === 'completed',
    60_000,
    100,
    'the task completed by worker B',
  );
  // Let A's held write run its course (without the local deadline it lands now).
  await new Promise((r) => setTimeout(r, LEASE_MS * 4 - (Date.now() - cutAt) + 500));
  proxy.heal();
  // A's run ends by itself once the partition heals (nothing of it is written).
  await pollUntil(
    async () => a.running(),
    (n) => n === 0,
    30_000,
    100,
    "worker A's run ending",
  );

  const mine = seen.filter((s) => s.taskId === taskId);
  const writesOf = (w: string) =>
    mine
      .filter((s) => s.worker === w && s.forwardedAt !== undefined)
      .map((s) => ({ from: s.forwardedAt!, to: s.answeredAt ?? Infinity, key: s.key }));
  const byA = writesOf('a');
  const byB = writesOf('b');
  // At no instant do two workers write for the task: every write of A's ended before B's
  // first began (A's held write was abandoned at its local deadline, not passed on).
  const firstB = Math.min(...byB.map((w) => w.from));
  expect(byA.filter((w) => w.to >= firstB)).toEqual([]);
  expect(mine.filter((s) => s.worker === 'a').map((s) => s.abandonedAt !== undefined)).toEqual([
    true,
  ]);
  // The journal and the downstream each hold every batch once, all of them B's.
  const steps = await sql<{ step: string; worker: string }>(
    stack.db.url,
    `SELECT step, worker FROM app.task_steps WHERE task_id = $1 ORDER BY seq`,
    [taskId],
  );
  expect(steps).toEqual([
    { step: 'batch:0', worker: 'partition-b' },
    { step: 'batch:1', worker: 'partition-b' },
    { step: 'batch:2', worker: 'partition-b' },
  ]);
  const writes = await sql<{ idempotency_key: string }>(
    stack.db.url,
    `SELECT idempotency_key FROM downstream.writes WHERE task_id = $1 ORDER BY idempotency_key`,
    [taskId],
  );
  expect(writes.map((w) => w.idempotency_key)).toEqual(
    [0, 1, 2].map((i) => `${taskId}:batch:${i}`),
  );
  const completed = await sql<{ n: number }>(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type = 'task.completed'`,
    [taskId],
  );
  expect(completed[0]!.n).toBe(1);
  await b.stop();
  await a.stop();
}, 120_000);
