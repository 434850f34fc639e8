import {
  cancelTaskNow,
  completeTask,
  createTask,
  expireTask,
  failTask,
  pauseTask,
  purgeExpired,
} from '../../src/task-state/index.ts';
import { revokePrincipal } from '../../src/revoke-principal.ts';
import { activeCountsDrift } from '../../../../test/support/active-counts.ts';
import {
  insertTask,
  LIMITS,
  openStateDatabase,
  startDeps,
  startInput,
  taskRow,
  type StateDatabase,
  claimLease,
} from './state-database.ts';

// Migration 230: the active counts a start's admission reads are kept by triggers on
// app.tasks, so every path that starts, ends or removes a task moves them, whichever role
// runs it, and the caps hold as they did when each start counted the tasks.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const kept = async (tenant: string, subject: string) => {
  const r = await s.admin.query<{ tenant: number | null; subject: number | null }>(
    `SELECT (SELECT active FROM app.active_tenants WHERE tenant = $1) AS tenant,
            (SELECT active FROM app.active_subjects WHERE tenant = $1 AND subject = $2) AS subject`,
    [tenant, subject],
  );
  return { tenant: r.rows[0]!.tenant ?? 0, subject: r.rows[0]!.subject ?? 0 };
};

async function started(subject: string, tenant: string): Promise<string> {
  const deps = startDeps(s, { ...LIMITS, maxActivePerUser: 100, maxActivePerTenant: 100 });
  const out = await createTask(deps, startInput(subject, tenant));
  if (!out.ok) throw new Error(`not started: ${out.code}`);
  return out.task.id;
}

const finished = {
  result: { content: [{ type: 'text', text: 'done' }] },
  text: '{"content":[{"type":"text","text":"done"}]}',
  sizeBytes: 4,
  deleteOnRead: false,
};

test('a start counts its task in; each way of ending counts it out, once', async () => {
  const tenant = 'counted';
  const ids = await Promise.all(Array.from({ length: 6 }, () => started('ann', tenant)));
  expect(await kept(tenant, 'ann')).toEqual({ tenant: 6, subject: 6 });

  const [done, failed, cancelled, late, paused, pausedThenCancelled] = ids as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const lease = await claimLease(s, done, 'w1');
  await completeTask(
    { pool: s.worker },
    { taskId: done, lease, workerId: 'w1', finished, runMs: 1, downstreamSystems: [] },
  );
  // A repeat of an ending matches nothing and moves nothing.
  await completeTask(
    { pool: s.worker },
    { taskId: done, lease, workerId: 'w1', finished, runMs: 1, downstreamSystems: [] },
  );
  expect(await kept(tenant, 'ann')).toEqual({ tenant: 5, subject: 5 });

  const failing = await claimLease(s, failed, 'w1');
  await failTask(
    { pool: s.worker },
    { taskId: failed, lease: failing, workerId: 'w1', outcome: 'error', message: 'x' },
  );
  await cancelTaskNow(
    { pool: s.gateway },
    { taskId: cancelled, by: { path: 'owner' }, message: 'Cancelled', settledBy: 'test' },
  );
  await expireTask({ pool: s.worker }, late, 'deadline passed');
  expect(await kept(tenant, 'ann')).toEqual({ tenant: 2, subject: 2 });

  // working → input_required → (cancelled): waiting for input is still active.
  const pausing = await claimLease(s, paused, 'w1');
  const row = await s.admin.query(`SELECT * FROM app.tasks WHERE id = $1`, [paused]);
  expect(await pauseTask(s.worker, { task: row.rows[0], lease: pausing, workerId: 'w1' })).toBe(
    true,
  );
  expect((await taskRow(s.admin, paused))!.status).toBe('input_required');
  expect(await kept(tenant, 'ann')).toEqual({ tenant: 2, subject: 2 });
  await cancelTaskNow(
    { pool: s.gateway },
    { taskId: paused, by: { path: 'admin' }, message: 'Cancelled', settledBy: 'test' },
  );
  await cancelTaskNow(
    { pool: s.gateway },
    {
      taskId: pausedThenCancelled,
      by: { path: 'owner' },
      message: 'Cancelled',
      settledBy: 'test',
    },
  );
  expect(await kept(tenant, 'ann')).toEqual({ tenant: 0, subject: 0 });
  expect(await activeCountsDrift(s.admin)).toEqual([]);
});

test("a revocation's endings count out every task of the principal, and only its", async () => {
  const tenant = 'revoked-counts';
  await Promise.all([
    ...Array.from({ length: 3 }, () => started('eve', tenant)),
    started('frank', tenant),
  ]);
  expect(await kept(tenant, 'eve')).toEqual({ tenant: 4, subject: 3 });
  const affected = await revokePrincipal(s.gateway, { tenant, subject: 'eve' }, { path: 'test' });
  expect(affected).toHaveLength(3);
  expect(await kept(tenant, 'eve')).toEqual({ tenant: 1, subject: 0 });
  expect(await kept(tenant, 'frank')).toEqual({ tenant: 1, subject: 1 });
});

test('a refused start and a repeat of a start count nothing', async () => {
  const tenant = 'refused-counts';
  const deps = startDeps(s);
  const input = startInput('gil', tenant);
  expect(await createTask(deps, input)).toMatchObject({ ok: true, created: true });
  expect(await createTask(deps, input)).toMatchObject({ ok: true, created: false });
  expect(await createTask(deps, startInput('gil', tenant))).toMatchObject({ ok: true });
  expect(await createTask(deps, startInput('gil', tenant))).toMatchObject({
    ok: false,
    code: 'user_limit',
  });
  expect(await kept(tenant, 'gil')).toEqual({ tenant: 2, subject: 2 });
});

test('the caps hold on the kept counts while starts and endings of one tenant interleave', async () => {
  const tenant = 'churn';
  const limits = { ...LIMITS, maxActivePerUser: 3, maxActivePerTenant: 5 };
  const deps = startDeps(s, limits);
  let refused = 0;
  for (let round = 0; round < 4; round++) {
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createTask(deps, startInput(`u${i % 4}`, tenant))),
    );
    refused += outcomes.filter((o) => !o.ok).length;
    const active = await s.admin.query<{ id: string; subject: string }>(
      `SELECT id, subject FROM app.tasks WHERE tenant = $1 AND status = 'working'`,
      [tenant],
    );
    expect(active.rows.length).toBeLessThanOrEqual(limits.maxActivePerTenant);
    // End them all at once, from outside, while the next round's counts are read.
    await Promise.all(
      active.rows.map((t) =>
        cancelTaskNow(
          { pool: s.gateway },
          { taskId: t.id, by: { path: 'owner' }, message: 'x', settledBy: 'test' },
        ),
      ),
    );
  }
  expect(refused).toBeGreaterThan(0);
  expect((await kept(tenant, 'u0')).tenant).toBe(0);
  expect(await activeCountsDrift(s.admin)).toEqual([]);
});

test('a task removed while active is counted out; the retention purge of ended ones moves nothing', async () => {
  const tenant = 'removed';
  const gone = await insertTask(s.admin, { tenant, subject: 'hal' });
  const ended = await insertTask(s.admin, { tenant, subject: 'hal', ttlMs: 1 });
  expect(await kept(tenant, 'hal')).toEqual({ tenant: 2, subject: 2 });
  await cancelTaskNow(
    { pool: s.gateway },
    { taskId: ended, by: { path: 'owner' }, message: 'x', settledBy: 'test' },
  );
  await s.admin.query(`DELETE FROM app.tasks WHERE id = $1`, [gone]);
  expect(await kept(tenant, 'hal')).toEqual({ tenant: 0, subject: 0 });
  await new Promise((r) => setTimeout(r, 5));
  await purgeExpired(s.worker);
  expect(await taskRow(s.admin, ended)).toBeUndefined();
  expect(await kept(tenant, 'hal')).toEqual({ tenant: 0, subject: 0 });
});

test('the counts are written at commit: a start rolled back counts nothing', async () => {
  const tenant = 'rolled-back';
  const c = await s.admin.connect();
  try {
    await c.query('BEGIN');
    await c.query(
      `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
         argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
         deadline, ttl_ms)
       VALUES (md5(random()::text), 'i', $1, 'ivy', 'c', '{}', 't', '{}', '{}', 'h', 'k',
         'explicit', 'c', now() + interval '1 hour', 1000)`,
      [tenant],
    );
    // Not yet: the row event waits for the commit.
    expect(
      (
        await c.query(`SELECT count(*)::int AS n FROM app.active_tenants WHERE tenant = $1`, [
          tenant,
        ])
      ).rows[0].n,
    ).toBe(0);
    await c.query('ROLLBACK');
  } finally {
    c.release();
  }
  expect(await kept(tenant, 'ivy')).toEqual({ tenant: 0, subject: 0 });
});

test('TRUNCATE of the tasks clears the counts with them', async () => {
  await insertTask(s.admin, { tenant: 'truncated', subject: 'jo' });
  expect((await kept('truncated', 'jo')).tenant).toBe(1);
  await s.admin.query(`TRUNCATE app.tasks CASCADE`);
  expect(await kept('truncated', 'jo')).toEqual({ tenant: 0, subject: 0 });
  expect(await activeCountsDrift(s.admin)).toEqual([]);
});
