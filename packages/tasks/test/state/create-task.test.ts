import { pollUntil } from '../../../../test/support/poll.ts';
import { CHANNELS } from '../../src/channels.ts';
import { createTask } from '../../src/task-state/index.ts';
import { ACTIVE } from '../../src/task-state/predicates.ts';
import {
  LIMITS,
  openStateDatabase,
  QUEUE,
  startDeps,
  startInput,
  type StateDatabase,
} from './state-database.ts';

// create-task.ts: the active-task caps per user and per tenant hold under concurrent starts
// (the tenant's cap lock), and a start checks revocation under the principal's lock, so a
// revocation in flight is either seen or finds the task.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const activeOf = async (tenant: string, subject?: string) =>
  (
    await s.admin.query(
      `SELECT count(*)::int AS n FROM app.tasks
        WHERE tenant = $1 AND ($2::text IS NULL OR subject = $2) AND status IN ('working', 'input_required')`,
      [tenant, subject ?? null],
    )
  ).rows[0].n as number;

test('the per-user cap: the start past it is refused with user_limit and nothing is created', async () => {
  const deps = startDeps(s);
  for (let i = 0; i < LIMITS.maxActivePerUser; i++) {
    expect(await createTask(deps, startInput('u1', 'caps-user'))).toMatchObject({
      ok: true,
      created: true,
    });
  }
  const over = await createTask(deps, startInput('u1', 'caps-user'));
  expect(over).toMatchObject({ ok: false, code: 'user_limit' });
  expect(await activeOf('caps-user', 'u1')).toBe(LIMITS.maxActivePerUser);
  // Another user of the tenant still may start.
  expect(await createTask(deps, startInput('u2', 'caps-user'))).toMatchObject({ ok: true });
});

test('the per-tenant cap holds under concurrent starts by different users', async () => {
  const deps = startDeps(s, { ...LIMITS, maxActivePerUser: 100 });
  const outcomes = await Promise.all(
    Array.from({ length: 8 }, (_, i) => createTask(deps, startInput(`t${i}`, 'caps-tenant'))),
  );
  expect(outcomes.filter((o) => o.ok)).toHaveLength(LIMITS.maxActivePerTenant);
  expect(outcomes.filter((o) => !o.ok && o.code === 'tenant_limit')).toHaveLength(
    8 - LIMITS.maxActivePerTenant,
  );
  expect(await activeOf('caps-tenant')).toBe(LIMITS.maxActivePerTenant);
  const denied = await s.admin.query(
    `SELECT count(*)::int AS n FROM audit.events WHERE type = 'task.denied' AND tenant = 'caps-tenant'
        AND reason = 'tenant_limit'`,
  );
  expect(denied.rows[0].n).toBe(8 - LIMITS.maxActivePerTenant);
});

test('the per-user cap holds under concurrent starts by one user', async () => {
  const deps = startDeps(s, { ...LIMITS, maxActivePerTenant: 100 });
  const outcomes = await Promise.all(
    Array.from({ length: 6 }, () => createTask(deps, startInput('racer', 'caps-race'))),
  );
  expect(outcomes.filter((o) => o.ok)).toHaveLength(LIMITS.maxActivePerUser);
  expect(await activeOf('caps-race', 'racer')).toBe(LIMITS.maxActivePerUser);
});

test('a start waits for a revocation in flight and, once it commits, is refused', async () => {
  const tenant = 'revoking';
  const revocation = await s.admin.connect();
  try {
    // What revokePrincipal does first: the principal's exclusive lock, then the mark.
    await revocation.query('BEGIN');
    await revocation.query(
      `SELECT pg_advisory_xact_lock(7310, hashtext(length($1) || ':' || $1 || $2))`,
      [tenant, 'bob'],
    );
    await revocation.query(
      `INSERT INTO app.principals (tenant, subject, revoked, revoked_at, updated_at)
       VALUES ($1, 'bob', true, now(), now())`,
      [tenant],
    );
    const start = createTask(startDeps(s), startInput('bob', tenant));
    // The start blocks on the principal's lock (shared, behind the exclusive one).
    await pollUntil(
      async () =>
        (
          await s.admin.query(
            `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
          )
        ).rows[0].n as number,
      (n) => n > 0,
      10_000,
      20,
      'the start to wait on the principal lock',
    );
    await revocation.query('COMMIT');
    expect(await start).toMatchObject({ ok: false, code: 'principal_revoked' });
  } finally {
    revocation.release();
  }
  expect(await activeOf(tenant, 'bob')).toBe(0);
});

test('app.start_admission reads counts kept for the statuses ACTIVE names, under the locks the code documents', async () => {
  const def = (
    await s.admin.query(
      `SELECT pg_get_functiondef('app.start_admission(text, text)'::regprocedure) AS d`,
    )
  ).rows[0].d as string;
  // The migrations keep their own copies of the predicate and the lock keys (a migration is
  // SQL): they must be the ones the rest of the code uses. The counts' triggers (migration
  // 230) say which rows are active in their WHEN clauses, as PostgreSQL prints them.
  const statuses = [...ACTIVE.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
  const triggers = await s.admin.query<{ name: string; def: string }>(
    `SELECT tgname AS name, pg_get_triggerdef(oid) AS def FROM pg_trigger
      WHERE tgrelid = 'app.tasks'::regclass AND tgname LIKE 'tasks_active_%'
        AND tgname <> 'tasks_active_cleared' ORDER BY 1`,
  );
  expect(triggers.rows.map((t) => t.name)).toEqual([
    'tasks_active_in',
    'tasks_active_moved',
    'tasks_active_out',
  ]);
  for (const t of triggers.rows) {
    const named = [...t.def.matchAll(/'(\w+)'::text/g)].map((m) => m[1]!);
    expect(new Set(named)).toEqual(new Set(statuses));
  }
  const counter = (
    await s.admin.query(`SELECT pg_get_functiondef('app.count_active_task()'::regprocedure) AS d`)
  ).rows[0].d as string;
  expect(counter).toContain(`NEW.${ACTIVE}`);
  expect(def).toContain(`pg_advisory_xact_lock(hashtext('mtg-cap:' || p_tenant))`);
  expect(def).toContain(
    `pg_advisory_xact_lock_shared(7310, hashtext(length(p_tenant) || ':' || p_tenant || p_subject))`,
  );
});

test('a start is one statement: its task, job, notice and events land together, with no lookup before it', async () => {
  const listener = await s.admin.connect();
  const notices: string[] = [];
  listener.on('notification', (m) => notices.push(m.payload ?? ''));
  await listener.query(`LISTEN ${CHANNELS.created}`);
  const sent: string[] = [];
  const counted = new Proxy(s.gateway, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return (q: string | { text: string }, ...rest: unknown[]) => {
        sent.push(typeof q === 'string' ? q : q.text);
        return (target.query as (...a: unknown[]) => unknown)(q, ...rest);
      };
    },
  });
  try {
    const deps = { ...startDeps(s), pool: counted };
    const started = await createTask(deps, startInput('one-statement', 'one-statement'));
    if (!started.ok) throw new Error(started.message);
    // The start itself, and nothing before it: no lookup of a live repeat, no BEGIN or COMMIT.
    expect(sent).toHaveLength(1);
    expect(sent[0]).toContain('app.start_admission');
    const id = started.task.id;
    const job = await s.admin.query(`SELECT name, state, data FROM pgboss.job WHERE id = $1`, [
      started.task.job_id,
    ]);
    expect(job.rows).toEqual([
      { name: QUEUE, state: 'created', data: expect.objectContaining({ taskId: id }) },
    ]);
    const events = await s.admin.query<{ type: string; body: string }>(
      `SELECT type, body FROM audit.events WHERE task_id = $1 ORDER BY seq`,
      [id],
    );
    expect(events.rows.map((e) => e.type)).toEqual(['task.created']);
    const created = JSON.parse(events.rows[0]!.body);
    // The deadline filled in by the statement is the row's, as the gateway reads and shows it.
    expect(created.data.deadline).toBe(started.task.deadline.toISOString());
    expect(created.data).toMatchObject({ jobId: started.task.job_id, idempotency: 'explicit' });
    await pollUntil(
      async () => notices.length,
      (n) => n > 0,
      5_000,
      20,
      'the creation notice',
    );
    expect(notices).toEqual([JSON.stringify({ taskId: id, queue: QUEUE })]);
  } finally {
    listener.release();
  }
});

test('a repeat is answered with its task, also at the active-task cap and when the exchange fails', async () => {
  const tenant = 'repeats';
  const deps = startDeps(s, { ...LIMITS, maxActivePerUser: 1 });
  const input = startInput('rita', tenant);
  const first = await createTask(deps, input);
  if (!first.ok) throw new Error(first.message);
  const deduplicated = async () =>
    (
      await s.admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type = 'task.deduplicated'`,
        [first.task.id],
      )
    ).rows[0]!.n;
  // Its slot taken: the start statement inserts nothing and the repeat gets the task.
  expect(await createTask(startDeps(s), input)).toMatchObject({
    ok: true,
    created: false,
    task: { id: first.task.id },
  });
  // At the cap (this user's one active task is that task): still the task, not user_limit.
  expect(await createTask(deps, input)).toMatchObject({
    ok: true,
    created: false,
    task: { id: first.task.id },
  });
  expect(await createTask(deps, startInput('rita', tenant))).toMatchObject({
    ok: false,
    code: 'user_limit',
  });
  // The authorization server unreachable: a repeat needs no delegation, a new start does.
  const unreachable = {
    ...startDeps(s),
    delegation: {
      exchanger: {
        exchange: () => Promise.reject(new Error('connect ECONNREFUSED')),
      } as never,
      cipher: undefined as never,
      workerResource: 'https://worker.test',
      graceSeconds: 60,
    },
  };
  expect(await createTask(unreachable, { ...input, subjectToken: 't' })).toMatchObject({
    ok: true,
    created: false,
    task: { id: first.task.id },
  });
  expect(
    await createTask(unreachable, { ...startInput('rita', tenant), subjectToken: 't' }),
  ).toMatchObject({ ok: false, code: 'delegation_unavailable' });
  expect(await deduplicated()).toBe(3);
  expect(await activeOf(tenant)).toBe(1);
});

test('a refused start writes nothing: no task, no job, no notice and no event but its denial', async () => {
  const tenant = 'refused-writes';
  const deps = startDeps(s, { ...LIMITS, maxActivePerUser: 1 });
  const listener = await s.admin.connect();
  const notices: string[] = [];
  listener.on('notification', (m) => notices.push(m.payload ?? ''));
  await listener.query(`LISTEN ${CHANNELS.created}`);
  try {
    const first = await createTask(deps, startInput('carol', tenant));
    expect(first).toMatchObject({ ok: true });
    await pollUntil(
      async () => notices.length,
      (n) => n > 0,
      5_000,
      20,
      'the first notice',
    );
    const jobsBefore = (await s.admin.query(`SELECT count(*)::int AS n FROM pgboss.job`)).rows[0].n;
    expect(await createTask(deps, startInput('carol', tenant))).toMatchObject({
      ok: false,
      code: 'user_limit',
    });
    const tasks = await s.admin.query(`SELECT id FROM app.tasks WHERE tenant = $1`, [tenant]);
    expect(tasks.rowCount).toBe(1);
    expect((await s.admin.query(`SELECT count(*)::int AS n FROM pgboss.job`)).rows[0].n).toBe(
      jobsBefore,
    );
    const types = await s.admin.query<{ type: string; reason: string | null }>(
      `SELECT type, (body::jsonb) ->> 'reason' AS reason FROM audit.events
        WHERE (body::jsonb) ->> 'tenant' = $1 ORDER BY seq`,
      [tenant],
    );
    expect(types.rows).toEqual([
      { type: 'task.created', reason: null },
      { type: 'task.denied', reason: 'user_limit' },
    ]);
    // A notice of the refused start would have come before this one's.
    const next = await createTask(deps, startInput('dave', tenant));
    if (!next.ok) throw new Error(next.message);
    await pollUntil(
      async () => notices.length,
      (n) => n > 1,
      5_000,
      20,
      'the next notice',
    );
    expect(notices[1]).toBe(JSON.stringify({ taskId: next.task.id, queue: QUEUE }));
    expect(notices).toHaveLength(2);
  } finally {
    listener.release();
  }
});
