import type { Clock } from '@mtg/clock';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { withTransaction, type Queryable } from '@mtg/db';
import { journalAnswerAndRequeue } from './journal-answer.ts';
import type { FormSchema, InputResponse } from '../input-schema.ts';
import type { JobQueue } from '../job-queue.ts';
import type { TaskRow, VerbTaskRow } from '../task-row.ts';
import { aboutTask } from './about-task.ts';
import { fenced, NOT_ENDED } from './predicates.ts';
import type { Lease } from './lease.ts';

/** A question a parked task waits on, as the wires show it. */
export interface PendingInput {
  /** The journal name the answer is recorded under (`ask:1`). */
  key: string;
  kind: 'input' | 'approval';
  message: string;
  requestedSchema: FormSchema;
  keepAnswer: boolean;
  /** approval: the scope an approver must hold. */
  scope?: string;
  requestedAt: string;
}

/**
 * working → input_required, parked: the tool asked its caller (ctx.ask) and the run gives
 * its lease back while a person thinks, as checkpoint mode does; the question is stored with
 * `task.input_requested` in the same transaction. A run that finds the question already
 * stored (a re-delivered job) parks again without a second event. Returns false when the
 * lease is no longer the writer's.
 */
export async function parkForInput(
  pool: Pool,
  p: {
    task: TaskRow;
    lease: Lease;
    workerId: string;
    key: string;
    message: string;
    schema: FormSchema;
    keepAnswer: boolean;
  },
): Promise<boolean> {
  return withTransaction(pool, async (c) => {
    const moved = await c.query(
      `UPDATE app.tasks SET status = 'input_required', lease_owner = NULL, lease_expires_at = NULL,
              status_message = $4, updated_at = now()
        WHERE id = $1 AND ${fenced('$2', '$3')} AND ${NOT_ENDED}
          AND NOT needs_live_user`,
      [p.task.id, p.lease.owner, p.lease.epoch, p.message.slice(0, 500)],
    );
    if (moved.rowCount !== 1) return false;
    const asked = await c.query(
      `INSERT INTO app.task_inputs (task_id, key, kind, message, schema, keep_answer)
       VALUES ($1, $2, 'input', $3, $4, $5) ON CONFLICT (task_id, key) DO NOTHING`,
      [p.task.id, p.key, p.message, JSON.stringify(p.schema), p.keepAnswer],
    );
    if (asked.rowCount === 1) {
      await appendAuditInTransaction(c, {
        type: 'task.input_requested',
        ...aboutTask(p.task),
        reason: 'tool_asked',
        actor: { subject: p.workerId, kind: 'worker' },
        data: {
          key: p.key,
          worker: p.workerId,
          fields: Object.keys(p.schema.properties),
          message: p.message.slice(0, 200),
        },
      });
    }
    return true;
  });
}

/** The question the task waits on now (none while it runs, or when it waits for a downstream). */
export async function pendingInput(
  db: Queryable,
  taskId: string,
): Promise<PendingInput | undefined> {
  const r = await db.query<{
    key: string;
    kind: 'input' | 'approval';
    message: string;
    schema: FormSchema;
    keep_answer: boolean;
    scope: string | null;
    requested_at: Date;
  }>(
    `SELECT key, kind, message, schema, keep_answer, scope, requested_at FROM app.task_inputs
      WHERE task_id = $1 AND answered_at IS NULL ORDER BY requested_at LIMIT 1`,
    [taskId],
  );
  const q = r.rows[0];
  return q
    ? {
        key: q.key,
        kind: q.kind,
        message: q.message,
        requestedSchema: q.schema,
        keepAnswer: q.keep_answer,
        ...(q.scope ? { scope: q.scope } : {}),
        requestedAt: q.requested_at.toISOString(),
      }
    : undefined;
}

/**
 * input_required → working: the owner's answer (already authorized and validated) is journaled
 * as the step the question is, the question closed, a job enqueued and `task.input_received`
 * written (with the redacted `summary`), all in one transaction: a worker that resumes finds
 * the answer in its journal and never asks again. False when the question is no longer open
 * (answered already, or the task ended).
 */
export async function recordAnswer(
  deps: { pool: Pool; queue: JobQueue; clock?: Clock },
  a: {
    task: VerbTaskRow;
    key: string;
    response: InputResponse;
    summary: Record<string, unknown>;
    by: { subject: string; client: string };
    correlationId: string;
    wire: string;
  },
): Promise<boolean> {
  const jobId = randomUUID();
  return withTransaction(deps.pool, async (c) => {
    const resumed = await c.query<{ deadline: Date; job_queue: string }>(
      `UPDATE app.tasks SET status = 'working', job_id = $2, status_message = 'Answer received',
              updated_at = now()
        WHERE id = $1 AND status = 'input_required' AND lease_owner IS NULL AND NOT needs_live_user
          AND EXISTS (SELECT 1 FROM app.task_inputs
                       WHERE task_id = $1 AND key = $3 AND answered_at IS NULL)
        RETURNING deadline, job_queue`,
      [a.task.id, jobId, a.key],
    );
    const row = resumed.rows[0];
    if (!row) return false;
    const closed = await c.query<{ requested_at: Date }>(
      `UPDATE app.task_inputs SET answered_at = now(), answered_by = $3
        WHERE task_id = $1 AND key = $2 AND answered_at IS NULL RETURNING requested_at`,
      [a.task.id, a.key, JSON.stringify(a.by)],
    );
    await journalAnswerAndRequeue(c, deps.queue, {
      taskId: a.task.id,
      key: a.key,
      output: a.response,
      askedAt: closed.rows[0]!.requested_at,
      jobId,
      jobQueue: row.job_queue,
      deadline: row.deadline,
      clock: deps.clock,
    });
    await appendAuditInTransaction(c, {
      type: 'task.input_received',
      ...aboutTask(a.task),
      correlationId: a.correlationId,
      actor: { subject: a.by.subject, client: a.by.client, kind: 'user' },
      data: { key: a.key, wire: a.wire, answer: a.summary },
    });
    return true;
  });
}

/**
 * Whether `by` already gave this answer (to question `key`, or to any of the task's
 * questions when no key is named): the retry of an answer whose reply was lost. The
 * journaled step of the question holds the answer as it was recorded.
 */
export async function answeredAlready(
  db: Queryable,
  taskId: string,
  by: { subject: string; client: string },
  answer: { key?: string; response: unknown },
): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM app.task_inputs q
       JOIN app.task_steps s ON s.task_id = q.task_id AND s.step = q.key
      WHERE q.task_id = $1 AND q.kind = 'input' AND q.answered_by = $2::jsonb
        AND ($3::text IS NULL OR q.key = $3) AND s.output -> 'value' = $4::jsonb
      LIMIT 1`,
    [taskId, JSON.stringify(by), answer.key ?? null, JSON.stringify(answer.response ?? null)],
  );
  return r.rowCount === 1;
}
