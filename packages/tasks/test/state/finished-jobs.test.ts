import { randomUUID } from 'node:crypto';
import { PgBoss } from 'pg-boss';
import { ROLES } from '@mtg/db';
import {
  createBoss,
  FINISHED_JOB_SECONDS,
  installQueue,
  JOB_SWEEP_SECONDS,
} from '../../src/job-queue.ts';
import { newTaskId } from '../../src/task-id.ts';
import { openStateDatabase, QUEUE, type StateDatabase } from './state-database.ts';

// pg-boss keeps a finished job a week unless told otherwise, and its supervision reads the
// whole job table at every pass: the product's jobs leave after FINISHED_JOB_SECONDS, whether
// their queue was made by this release or an earlier one.
const OLD_QUEUE = 'finished-earlier-release';

let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const deletionOf = async (queue: string) =>
  (
    await s.admin.query<{ deletion_seconds: number }>(
      `SELECT deletion_seconds FROM pgboss.queue WHERE name = $1`,
      [queue],
    )
  ).rows[0]?.deletion_seconds;

test("a queue made by this release, or by an earlier one and installed again, keeps finished jobs FINISHED_JOB_SECONDS, not pg-boss's week", async () => {
  expect(FINISHED_JOB_SECONDS).toBeLessThan(604_800);
  expect(await deletionOf(QUEUE)).toBe(FINISHED_JOB_SECONDS);

  // An earlier release created its queues with pg-boss's defaults.
  const boss = new PgBoss({ connectionString: s.db.url, schedule: false, supervise: false });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue(OLD_QUEUE, { policy: 'standard' });
  await boss.stop({ graceful: false, close: true });
  expect(await deletionOf(OLD_QUEUE)).toBe(604_800);

  await installQueue(s.db.url, [ROLES.gateway, ROLES.worker], [QUEUE, OLD_QUEUE]);
  expect(await deletionOf(OLD_QUEUE)).toBe(FINISHED_JOB_SECONDS);
});

test('a job sent either way leaves at the supervision pass after FINISHED_JOB_SECONDS, and not before', async () => {
  // The start's own insert (beside its task, create-task.ts) and a requeue's send.
  const inserted = randomUUID();
  const insert = await s.queue.jobInsert(taskJob(inserted));
  await s.gateway.query(insert.text, [insert.value]);
  const sent = await sendJob();
  const kept = await sendJob();
  const jobs = await s.admin.query<{ id: string; deletion_seconds: number }>(
    `SELECT id, deletion_seconds FROM pgboss.job WHERE id = ANY($1)`,
    [[inserted, sent, kept]],
  );
  expect(jobs.rows.map((r) => r.deletion_seconds)).toEqual([
    FINISHED_JOB_SECONDS,
    FINISHED_JOB_SECONDS,
    FINISHED_JOB_SECONDS,
  ]);

  // Two finished past the window (one completed, one failed), one half the window ago (not
  // a minute short of it: a slow machine must not age it past the window before the pass).
  await s.admin.query(
    `UPDATE pgboss.job SET state = CASE WHEN id = $1 THEN 'failed'::pgboss.job_state ELSE 'completed' END,
            completed_on = CASE WHEN id = $3 THEN now() - ($4 / 2) * interval '1 second'
                                ELSE now() - ($4 + 60) * interval '1 second' END
      WHERE id = ANY($2)`,
    [sent, [inserted, sent, kept], kept, FINISHED_JOB_SECONDS],
  );
  await supervisionPass();
  expect(await remaining([inserted, sent, kept])).toEqual([kept]);
});

test('the sweep comes again JOB_SWEEP_SECONDS after the last, not a day after', async () => {
  expect(JOB_SWEEP_SECONDS).toBeLessThan(FINISHED_JOB_SECONDS);
  const finishedJob = async () => {
    const id = await sendJob();
    await s.admin.query(
      `UPDATE pgboss.job SET state = 'completed', completed_on = now() - $2 * interval '1 second'
        WHERE id = $1`,
      [id, FINISHED_JOB_SECONDS + 60],
    );
    return id;
  };
  // The queue's last sweep as pg-boss stamps it, moved back by `seconds`.
  const lastSweepAgo = (seconds: number) =>
    s.admin.query(
      `UPDATE pgboss.queue SET maintain_on = now() - $2 * interval '1 second' WHERE name = $1`,
      [QUEUE, seconds],
    );

  const early = await finishedJob();
  await lastSweepAgo(0);
  await supervisionPass();
  expect(await remaining([early])).toEqual([early]);

  await lastSweepAgo(JOB_SWEEP_SECONDS + 5);
  await supervisionPass();
  expect(await remaining([early])).toEqual([]);
});

const taskJob = (jobId: string) => ({
  queue: QUEUE,
  taskId: newTaskId(),
  jobId,
  expireInSeconds: 60,
});

/** A job sent as a requeue sends it; its id. */
async function sendJob(): Promise<string> {
  const id = randomUUID();
  await s.queue.enqueue(s.gateway, taskJob(id));
  return id;
}

/** A pass as the workers' maintenance leader runs it. */
async function supervisionPass(): Promise<void> {
  const boss = createBoss(s.worker, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  try {
    await boss.supervise();
  } finally {
    await boss.stop({ graceful: false, close: false });
  }
}

async function remaining(ids: string[]): Promise<string[]> {
  const r = await s.admin.query<{ id: string }>(`SELECT id FROM pgboss.job WHERE id = ANY($1)`, [
    ids,
  ]);
  return r.rows.map((row) => row.id);
}
