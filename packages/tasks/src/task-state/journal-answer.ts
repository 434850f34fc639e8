import { nowMs, type Clock } from '@mtg/clock';
import type { Queryable } from '@mtg/db';
import { CHANNELS } from '../channels.ts';
import type { JobQueue } from '../job-queue.ts';

/**
 * The common end of an answered question (ctx.ask) and a decided approval (ctx.approval),
 * inside their transaction: the answer is journaled as the step the question is (a resumed
 * worker finds it and never asks again), and the parked task is queued and its workers woken.
 */
export async function journalAnswerAndRequeue(
  c: Queryable,
  queue: JobQueue,
  a: {
    taskId: string;
    /** The question's step name. */
    key: string;
    output: unknown;
    askedAt: Date;
    jobId: string;
    jobQueue: string;
    deadline: Date;
    /** The gateway's clock: what is left of the deadline (default: the system's). */
    clock?: Clock | undefined;
  },
): Promise<void> {
  await c.query(
    `INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
     SELECT t.id, $2, COALESCE((SELECT max(seq) FROM app.task_steps WHERE task_id = t.id), 0) + 1,
            $3, t.lease_epoch, 'gateway', $4
       FROM app.tasks t WHERE t.id = $1
     ON CONFLICT (task_id, step) DO NOTHING`,
    [a.taskId, a.key, JSON.stringify({ value: a.output }), a.askedAt],
  );
  const remainingMs = Math.max(1000, a.deadline.getTime() - nowMs(a.clock));
  await queue.enqueue(c, {
    queue: a.jobQueue,
    taskId: a.taskId,
    jobId: a.jobId,
    expireInSeconds: Math.ceil(remainingMs / 1000) + 60,
  });
  await c.query('SELECT pg_notify($1, $2)', [
    CHANNELS.created,
    JSON.stringify({ taskId: a.taskId, queue: a.jobQueue }),
  ]);
}
