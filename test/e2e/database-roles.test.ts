// The stack's processes connect with LOGIN roles of their own, each a member of its group
// role only: no application session is, or can become, the owner or a superuser. So the
// database's refusals (append-only audit trail, least privilege) hold for a compromised
// gateway, worker or downstream, not only in a layout nobody ships. The owner URL serves
// migrations, the queue install and this test's own checks; a process given it refuses to
// start.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
let owner: pg.Client;
const GROUPS = { gateway: 'mtg_gateway', worker: 'mtg_worker', downstream: 'mtg_downstream' };
const services = Object.keys(GROUPS) as Array<keyof typeof GROUPS>;

beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  owner = new pg.Client({ connectionString: stack.db.url });
  await owner.connect();
  // One task end to end, so that every process has opened its sessions (the downstream's
  // pool connects on its first write) and the audit trail has events to protect.
  const token = await stack.token('rhea', 'acme');
  const started = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    {
      name: 'bulk_update_records',
      arguments: { collection: 'roles', count: 10, patch: { checked: true } },
    },
    { tasksExtension: true },
  );
  const taskId = started.body?.result?.taskId as string;
  expect({ status: started.status, taskId }).toEqual({ status: 200, taskId: expect.any(String) });
  const status = await pollUntil(
    async () =>
      (await owner.query('SELECT status FROM app.tasks WHERE id = $1', [taskId])).rows[0]?.status,
    (s) => s === 'completed' || s === 'failed',
  );
  expect(status).toBe('completed');
});
afterAll(async () => {
  await owner?.end();
  await stack?.close();
});

test('every session of the gateway, the worker and the downstream logs in as its own role, none as a superuser', async () => {
  const { rows } = await owner.query<{ usename: string; rolsuper: boolean; app: string }>(
    `SELECT a.usename, r.rolsuper, a.application_name AS app
       FROM pg_stat_activity a JOIN pg_roles r ON r.rolname = a.usename
      WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
        AND a.backend_type = 'client backend'`,
  );
  const logins = Object.fromEntries(
    services.map((s) => [s, decodeURIComponent(new URL(stack.db.logins[s]).username)]),
  );
  expect(rows.filter((r) => r.rolsuper)).toEqual([]);
  expect(new Set(rows.map((r) => r.usename))).toEqual(new Set(Object.values(logins)));
  // The LISTEN connections too (task-events), not only the pools.
  expect(
    rows
      .filter((r) => r.app === 'task-events')
      .map((r) => r.usename)
      .sort(),
  ).toEqual([logins.gateway, logins.worker].sort());
});

test('each login is a member of its group role only, with no attribute beyond LOGIN', async () => {
  for (const service of services) {
    const name = decodeURIComponent(new URL(stack.db.logins[service]).username);
    const { rows } = await owner.query(
      `SELECT r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
              r.rolbypassrls,
              ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                     WHERE m.member = r.oid) AS member_of
         FROM pg_roles r WHERE r.rolname = $1`,
      [name],
    );
    expect({ service, ...rows[0] }).toEqual({
      service,
      rolcanlogin: true,
      rolsuper: false,
      rolcreaterole: false,
      rolcreatedb: false,
      rolreplication: false,
      rolbypassrls: false,
      member_of: [GROUPS[service]],
    });
  }
});

describe.each(services)('a %s session', (service) => {
  let session: pg.Client;
  beforeAll(async () => {
    // Exactly as the process connects: its login URL, dropped to its group role at startup.
    session = new pg.Client({
      connectionString: stack.db.logins[service],
      options: `-c role=${GROUPS[service]}`,
    });
    await session.connect();
  });
  afterAll(() => session.end());

  /** The SQLSTATE `sql` fails with, or 'accepted'; the session is left as it was. */
  const refused = async (sql: string) => {
    const error = await session.query(sql).then(
      () => undefined,
      (e: { code?: string }) => e,
    );
    await session.query('ROLLBACK').catch(() => {});
    return { sql, code: error ? error.code : 'accepted' };
  };

  test('cannot SET ROLE to the owner, to a superuser or to another application role', async () => {
    const ownerName = decodeURIComponent(new URL(stack.db.url).username);
    const other = service === 'worker' ? 'mtg_gateway' : 'mtg_worker';
    for (const sql of [
      `SET ROLE ${pg.escapeIdentifier(ownerName)}`,
      'SET ROLE postgres',
      `SET ROLE ${other}`,
      // Back to the login itself first: it holds nothing more than its group.
      `RESET ROLE; SET ROLE ${pg.escapeIdentifier(ownerName)}`,
      'SET SESSION AUTHORIZATION postgres',
    ]) {
      expect(await refused(sql)).toEqual({ sql, code: '42501' });
    }
    const { rows } = await session.query('SELECT current_user AS u, session_user AS s');
    expect(rows[0].u).not.toBe(ownerName);
  });

  test('cannot set session_replication_role, which would switch the append-only triggers off', async () => {
    for (const sql of [
      'SET session_replication_role = replica',
      'BEGIN; SET LOCAL session_replication_role = replica',
      `SELECT set_config('session_replication_role', 'replica', false)`,
    ]) {
      expect(await refused(sql)).toEqual({ sql, code: '42501' });
    }
  });

  test('cannot UPDATE, DELETE or TRUNCATE audit.events, nor disable its triggers', async () => {
    const before = (await owner.query('SELECT count(*)::int AS n FROM audit.events')).rows[0].n;
    expect(before).toBeGreaterThan(0);
    for (const sql of [
      `UPDATE audit.events SET type = 'x'`,
      'DELETE FROM audit.events',
      'TRUNCATE audit.events',
      'ALTER TABLE audit.events DISABLE TRIGGER ALL',
    ]) {
      expect(await refused(sql)).toEqual({ sql, code: '42501' });
    }
    const after = (await owner.query('SELECT count(*)::int AS n FROM audit.events')).rows[0].n;
    expect(after).toBe(before);
  });
});

test.each(['gateway', 'worker', 'downstream'] as const)(
  'the %s process given the owner URL refuses to start (exit 2) and says what to connect with instead',
  async (app) => {
    const main = fileURLToPath(new URL(`../../apps/${app}/src/main.ts`, import.meta.url));
    const child = fork(main, [], {
      execArgv: [],
      env: {
        PATH: process.env.PATH ?? '',
        ...stack.env,
        DATABASE_URL: stack.db.url,
        GATEWAY_PORT: '0',
        DOWNSTREAM_PORT: '0',
        ...(app === 'worker' ? { CLIENT_SECRET: stack.secrets.clientSecrets['mcp-worker'] } : {}),
      },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const ready = new Promise<'ready'>((resolve) => child.once('message', () => resolve('ready')));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const first = await Promise.race([ready, exited]);
    if (first === 'ready') child.kill('SIGKILL');
    expect({ first, stderr }).toEqual({
      first: 2,
      stderr: expect.stringContaining(
        `${app}: database login "${decodeURIComponent(new URL(stack.db.url).username)}" is a superuser or can become the database owner`,
      ),
    });
  },
);
