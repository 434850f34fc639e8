import { REAP_EXPIRED_LEASES } from '../../src/task-state/lease.ts';
import { maintenanceSweep } from '../../src/maintenance-sweep.ts';
import { releaseLease, renewLease } from '../../src/task-state/index.ts';
import {
  expireLease,
  insertTask,
  openStateDatabase,
  taskRow,
  type StateDatabase,
  claimLease,
} from './state-database.ts';

// lease.ts: renewal and release are fenced by owner and epoch; the reaper frees only leases
// that have lapsed, so their task's next claim is a takeover at a new epoch.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

test('the holder renews (with progress); a stale epoch renews nothing', async () => {
  const id = await insertTask(s.admin);
  const stale = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  // The same worker id at the next epoch: only the epoch tells the stale holder apart.
  const current = await claimLease(s, id, 'w1');
  const before = (await taskRow(s.admin, id))!.lease_expires_at!;
  expect(await renewLease(s.worker, id, stale, 600_000)).toMatchObject({ mine: false });
  expect((await taskRow(s.admin, id))!.lease_expires_at).toEqual(before);
  const b = await renewLease(s.worker, id, current, 600_000, { current: 2, total: 5 });
  expect(b).toMatchObject({ mine: true });
  expect((await taskRow(s.admin, id))!.lease_expires_at!.getTime()).toBeGreaterThan(
    before.getTime(),
  );
});

test("release by a stale holder leaves the new holder's lease", async () => {
  const id = await insertTask(s.admin);
  const stale = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  await claimLease(s, id, 'w1');
  await releaseLease(s.worker, id, stale);
  expect(await taskRow(s.admin, id)).toMatchObject({ lease_owner: 'w1', lease_epoch: 2 });
});

test('the reaper frees a lapsed lease, leaves a live one, and the next claim takes over', async () => {
  const lapsed = await insertTask(s.admin);
  const live = await insertTask(s.admin);
  await claimLease(s, lapsed, 'dead-worker');
  await claimLease(s, live, 'live-worker');
  await expireLease(s.admin, lapsed);
  const { reaped } = await maintenanceSweep(s.worker);
  expect(reaped.map((r) => r.id)).toContain(lapsed);
  expect(reaped.map((r) => r.id)).not.toContain(live);
  expect(await taskRow(s.admin, lapsed)).toMatchObject({ lease_owner: null, lease_epoch: 1 });
  expect(await taskRow(s.admin, live)).toMatchObject({ lease_owner: 'live-worker' });
  expect(await claimLease(s, lapsed, 'w3')).toEqual({ owner: 'w3', epoch: 2 });
});

test('the reaper reads the leased tasks only, however many active tasks wait for a worker', async () => {
  // A backlog: thousands of queued tasks, none leased, and one leased task.
  await s.admin.query(
    `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
       argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
       deadline, ttl_ms, job_id, job_queue, status_message)
     SELECT md5('backlog-' || n), 'https://idp.test', 'backlog', 'bob', 'agent', '{}', 'slow_tool',
            '{}', '{}', 'h', 'backlog-' || n, 'explicit', 'c', now() + interval '1 hour',
            3600000, gen_random_uuid(), 'q', 'queued'
       FROM generate_series(1, 5000) AS n`,
  );
  await claimLease(s, await insertTask(s.admin), 'w-backlog');
  await s.admin.query('ANALYZE app.tasks');
  const plan = JSON.stringify(
    (await s.admin.query(`EXPLAIN (FORMAT JSON) ${REAP_EXPIRED_LEASES}`)).rows[0]['QUERY PLAN'],
  );
  expect(plan).toContain('"Index Name":"tasks_leased"');
});

// The leader's tick in one statement (maintenanceSweep): the reaper's write and the deadline
// read see the same snapshot, and each part answers what it did on its own.
const pastDeadline = (id: string) =>
  s.admin.query(`UPDATE app.tasks SET deadline = now() - interval '1 second' WHERE id = $1`, [id]);

test('one sweep reaps lapsed leases and reads late tasks: a late task whose lease it reaps is not live', async () => {
  const lapsed = await insertTask(s.admin);
  const lateLapsed = await insertTask(s.admin);
  const lateLive = await insertTask(s.admin);
  const onTime = await insertTask(s.admin);
  await claimLease(s, lapsed, 'dead-worker');
  await claimLease(s, lateLapsed, 'dead-worker');
  await claimLease(s, lateLive, 'live-worker');
  await claimLease(s, onTime, 'live-worker');
  await expireLease(s.admin, lapsed);
  await expireLease(s.admin, lateLapsed);
  await pastDeadline(lateLapsed);
  await pastDeadline(lateLive);

  const sweep = await maintenanceSweep(s.worker);

  const [job] = (
    await s.admin.query('SELECT job_id, job_queue FROM app.tasks WHERE id = $1', [lapsed])
  ).rows;
  expect(sweep.reaped).toEqual(
    expect.arrayContaining([{ id: lapsed, ...job }, expect.objectContaining({ id: lateLapsed })]),
  );
  expect(sweep.reaped.map((r) => r.id)).not.toContain(lateLive);
  expect(await taskRow(s.admin, lapsed)).toMatchObject({ lease_owner: null });
  expect(sweep.late).toEqual(
    expect.arrayContaining([
      { id: lateLapsed, live: false, waiting: null },
      { id: lateLive, live: true, waiting: null },
    ]),
  );
  expect(sweep.late.map((t) => t.id)).not.toContain(onTime);
  expect(sweep.late.map((t) => t.id)).not.toContain(lapsed);
  expect(Array.isArray(sweep.unclaimed)).toBe(true);

  // Nothing left to reap: the next sweep reaps none of them again.
  const again = await maintenanceSweep(s.worker);
  expect(again.reaped.map((r) => r.id)).not.toContain(lapsed);
});
