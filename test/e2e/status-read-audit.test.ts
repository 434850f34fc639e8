// Status reads as the audit trail keeps them (STATUS_READ_AUDIT, docs/audit.md "Status
// reads"): by default the first read of each status by each caller, on every wire and across
// gateway replicas (the marks are in PostgreSQL); denials and result reads always; `all`
// every read. The policy each gateway ran under is itself in the trail. (The key's parts —
// caller, changes of status — one by one: packages/tasks/test/audit-status-read.test.ts.)
import type http from 'node:http';
import { buildGateway, gatewayConfigSchema } from '@mtg/app-gateway';
import { readStatusReadPolicy } from '@mtg/audit';
import { parseConfig } from '@mtg/config';
import { createLogger } from '@mtg/log';
import { createGatewayServer } from '../../apps/gateway/src/tls.ts';
import { runScript } from '../../packages/audit/test/support/run-script.ts';
import { startConsole } from '../support/console.ts';
import { logInOverHttp, send } from '../support/console-http.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire, jobToolsWire, type Wire } from '../support/wires.ts';

let stack: Stack;
let other: { url: string; close(): Promise<void> };
const started = new Date();

beforeAll(async () => {
  // No worker: a task stays `working` until the test cancels it, so each status lasts as
  // long as the test polls it.
  stack = await startStack({ workers: 0 });
  other = await secondGateway();
});
afterAll(async () => {
  await other?.close();
  await stack?.close();
});

const WIRES: Array<[string, (url: string) => Wire]> = [
  ['2025-11-25 tasks/get', coreWire],
  ['2026-07-28 tasks/get', extWire],
  ['get_job_status', jobToolsWire],
];

interface Read {
  subject: string;
  status: string;
  recorded: string;
}

const statusReads = (taskId: string) =>
  sql<Read>(
    stack.db.url,
    `SELECT subject, b -> 'data' ->> 'status' AS status, b -> 'data' ->> 'recorded' AS recorded
       FROM (SELECT subject, seq, body::jsonb AS b FROM audit.events
              WHERE task_id = $1 AND type = 'task.status_read') e ORDER BY seq`,
    [taskId],
  );

const resultReads = async (taskId: string) =>
  (
    await sql<{ status: string }>(
      stack.db.url,
      `SELECT body::jsonb -> 'data' ->> 'status' AS status FROM audit.events
        WHERE task_id = $1 AND type = 'task.result_read' ORDER BY seq`,
      [taskId],
    )
  ).map((r) => r.status);

const count = async (taskId: string, type: string, subject: string) =>
  (
    await sql<{ n: number }>(
      stack.db.url,
      'SELECT count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type = $2 AND subject = $3',
      [taskId, type, subject],
    )
  )[0]!.n;

describe.each(WIRES)('%s', (name, wireOf) => {
  test('40 polls of one status by its owner, through two gateways, are one status_read per status', async () => {
    const here = wireOf(stack.mcpUrl);
    const there = wireOf(other.url);
    const owner = `poller-${name.replace(/\W+/g, '-')}`;
    const token = await stack.token(owner, 'acme');
    const id = await here.start(token, 'generate_report', {
      report: `polled-${name.replace(/\W+/g, '-')}`,
    });
    // Alternating replicas: the mark one wrote is the mark the other finds.
    const poll = async (n: number, status: string) => {
      for (let i = 0; i < n; i++) {
        const r = await (i % 2 ? there : here).get(token, id);
        expect(r).toMatchObject({ ok: true });
        expect(JSON.stringify(r)).toContain(`"status":"${status}"`);
      }
    };
    await poll(40, 'working');
    expect(await statusReads(id)).toEqual([
      { subject: owner, status: 'working', recorded: 'first-per-change' },
    ]);

    // Another principal of the tenant: refused, and the refusal recorded whatever the
    // status-read policy (repeats within the fold's window are counted into its summary).
    const stranger = `stranger-${owner}`;
    const strangerToken = await stack.token(stranger, 'acme');
    for (let i = 0; i < 3; i++)
      expect(await here.get(strangerToken, id)).toMatchObject({ ok: false });
    expect(await count(id, 'task.denied', stranger)).toBe(1);

    // A change of status: the first read after it is recorded again, once.
    expect(await there.cancel(token, id)).toMatchObject({ ok: true });
    await poll(40, 'cancelled');
    // The 2026 tasks/get of an ended task is its retrieval: every one recorded, as that one
    // event, which names the status it showed.
    const retrieval = name.startsWith('2026');
    expect(await statusReads(id)).toEqual([
      { subject: owner, status: 'working', recorded: 'first-per-change' },
      ...(retrieval ? [] : [{ subject: owner, status: 'cancelled', recorded: 'first-per-change' }]),
    ]);
    expect(await resultReads(id)).toEqual(retrieval ? Array(40).fill('cancelled') : []);
  });
});

test('the trail says which policy the gateways ran under, and `all` records every read', async () => {
  const before = await readStatusReadPolicy(sqlClient());
  expect(before.policy).toBe('first-per-change');
  // Since the first of this run's starts (the stack's gateway, then the second replica).
  expect(before.since!.getTime()).toBeGreaterThanOrEqual(started.getTime() - 1000);

  // What an auditor is told, on the console's task page and by `npm run -s audit -- task`.
  const token = await stack.token('looked-at', 'acme');
  const wire = extWire(stack.mcpUrl);
  const looked = await wire.start(token, 'generate_report', { report: 'looked-at' });
  expect(await wire.get(token, looked)).toMatchObject({ ok: true });
  const told =
    /status reads recorded: first per caller per status change .*; a read that brought the result is its task\.result_read \(policy since \d{4}-\d\d-\d\dT/;
  const cli = await runScript('scripts/audit.ts', ['task', looked, '--format', 'json'], {
    DATABASE_URL: stack.db.url,
  });
  expect(cli.code).toBe(0);
  expect(cli.stderr).toMatch(told);
  expect(JSON.parse(cli.stdout).map((e: { type: string }) => e.type)).toContain('task.status_read');
  const console_ = await startConsole(stack);
  try {
    const { jar } = await logInOverHttp(console_.url, 'auditor', { sub: 'aud', tenant: 'acme' });
    const page = await send(jar, `${console_.url}/tasks/${looked}`);
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/id="status-read-policy"/);
    expect(page.text).toMatch(told);
  } finally {
    await console_.close();
  }

  const every = await secondGateway({ STATUS_READ_AUDIT: 'all' });
  try {
    const wire = extWire(every.url);
    const token = await stack.token('every-poller', 'acme');
    const id = await wire.start(token, 'generate_report', { report: 'every-read' });
    for (let i = 0; i < 5; i++) expect(await wire.get(token, id)).toMatchObject({ ok: true });
    expect(await statusReads(id)).toEqual(
      Array.from({ length: 5 }, () => ({
        subject: 'every-poller',
        status: 'working',
        recorded: 'all',
      })),
    );
    const after = await readStatusReadPolicy(sqlClient());
    expect(after.policy).toBe('all');
    expect(after.since!.getTime()).toBeGreaterThan(before.since!.getTime());
  } finally {
    await every.close();
  }
});

test('STATUS_READ_AUDIT_SAMPLE_RATE stops the gateway with what to set instead', () => {
  expect(() =>
    parseConfig(gatewayConfigSchema, { ...stack.env, STATUS_READ_AUDIT_SAMPLE_RATE: '1' }),
  ).toThrow(/STATUS_READ_AUDIT_SAMPLE_RATE.*was removed: set STATUS_READ_AUDIT=first-per-change/);
});

/** What the auditor tools read through: any queryable on the test's database. */
function sqlClient() {
  return {
    query: async (text: string) => ({ rows: await sql(stack.db.url, text) }),
  } as never;
}

/** Another gateway replica: its own pools and listener, the same database and IdP. */
async function secondGateway(
  env: Record<string, string> = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const port = await freePort();
  const gateway = await buildGateway(
    parseConfig(gatewayConfigSchema, { ...stack.env, GATEWAY_PORT: String(port), ...env }),
    createLogger('test', { silent: !process.env.TEST_LOGS }),
    { registry: stack.registry },
  );
  const server: http.Server = createGatewayServer(gateway.app, gateway.tls);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      await gateway.close();
    },
  };
}
