import { claimTask } from '@mtg/tasks';
import { createDelegationReads } from '../src/task-credentials.ts';
import {
  insertSealedDelegation,
  insertTask,
  openStateDatabase,
  type StateDatabase,
} from '../../tasks/test/state/state-database.ts';

// task-credentials.ts: a run's first exchange opens the sealed delegation its claim read
// (no statement of its own); every later exchange reads the row again, so it still finds a
// delegation that ended or was wiped meanwhile.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

async function claimedWithDelegation(expiresInS: number) {
  const id = await insertTask(s.admin);
  await insertSealedDelegation(s.admin, id, { keyId: 'k1', expiresInS });
  const c = await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
  if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
  return { id, delegation: c.delegation };
}

test('the first read is the claim copy; the next reads the row as it is now', async () => {
  const { id, delegation } = await claimedWithDelegation(600);
  const read = createDelegationReads(s.worker, id, delegation);
  // Wiped after the claim: the first read does not see it (it reads nothing), the next does.
  await s.admin.query(`DELETE FROM app.task_credentials WHERE task_id = $1`, [id]);
  expect(await read()).toEqual({
    sealed: {
      keyId: 'k1',
      iv: Buffer.from([1]),
      ciphertext: Buffer.from([2]),
      tag: Buffer.from([3]),
    },
    expired: false,
  });
  expect(await read()).toBeUndefined();
});

test('the claim copy expires when the time it had left has passed on the run clock', async () => {
  const { id, delegation } = await claimedWithDelegation(30);
  let now = Date.now();
  const read = createDelegationReads(s.worker, id, delegation, () => new Date(now));
  now += 31_000;
  expect(await read()).toMatchObject({ expired: true });
  // The row, read by the database clock, has not expired yet.
  expect(await read()).toMatchObject({ expired: false, sealed: { keyId: 'k1' } });
});

test('a task claimed without a delegation: the first read finds none, without a read', async () => {
  const id = await insertTask(s.admin);
  const read = createDelegationReads(s.worker, id, null);
  await insertSealedDelegation(s.admin, id, { keyId: 'k2', expiresInS: 3600 });
  expect(await read()).toBeUndefined();
  expect(await read()).toMatchObject({ sealed: { keyId: 'k2' } });
});
