import { inSpan } from '@mtg/telemetry';
import type { Pool } from 'pg';
import { appendAudit } from '@mtg/audit';
import { withTransaction } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { appendCancelled, settleTask, type OnTaskEnded, type TaskRow } from '@mtg/tasks';
import { isToolError, type TargetClient } from '@mtg/tool-kit';
import {
  describeUnavailable,
  isDownstreamUnavailable,
  toolErrorResult,
  type DownstreamUnavailable,
  type LongToolDefinition,
  type TaskContext,
} from '@mtg/tools';
import { journalStep, loadJournal, recordProgress } from './journal.ts';
import { claimLease, releaseLease, renewAndCheck, type Boundary, type Lease } from './lease.ts';
import { abortableSleep, StopRun, type StopReason } from './stop.ts';
import { DelegationEnded } from './task-credentials.ts';

/** The targets of one run: a client per target name, and stage boundaries for their tokens. */
export interface TaskTargets {
  client(
    name: string,
    hooks: { signal: AbortSignal; beforeCall: () => Promise<void> },
  ): TargetClient;
  /** A new stage begins: each target's next call gets a fresh credential. */
  beginStage(): void;
}

/** What this worker can run: a tool it serves, at the schema fingerprint it serves. */
export interface ServedTool {
  tool: LongToolDefinition;
  fingerprint: string;
}

export interface RunDeps {
  pool: Pool;
  /** The tools this worker serves (WORKER_TOOLS), by name. */
  tools: ReadonlyMap<string, ServedTool>;
  workerId: string;
  /** Lease length; renewed at every boundary and every leaseMs/3 in between. */
  leaseMs: number;
  /** Attempts after which an unexpected error fails the task instead of retrying. */
  maxAttempts: number;
  /** Builds the task's target clients (credentials per audience, resilience per target). */
  targetsFor(task: TaskRow, tool: LongToolDefinition): TaskTargets;
  logger: Logger;
  /** Aborted on graceful shutdown: the run stops at its next step boundary. */
  drain?: AbortSignal;
  /** Told about each task this worker's runs end (not when another process ended it first). */
  onTaskEnded?: OnTaskEnded;
}

/** What the worker loop does with the job afterwards. */
export type RunResult =
  | 'settled' // terminal now: complete the job
  | 'gone' // nothing to run: complete the job
  | 'released' // shutdown: lease given back; let the job be retried elsewhere
  | 'held' // another live worker has it: retry later
  | 'lost' // lease taken over while running: the other worker owns it now
  | 'paused' // checkpoint mode: waiting for the owner with a fresh token; job done
  | 'unservable' // this worker does not run this tool at the task's schema; job done
  | 'retry'; // unexpected error: retry from the journal

/**
 * Runs (or resumes) one task under a fenced lease. `stop` aborts it from outside: a cancel
 * or deadline notification, or shutdown. Finished steps are never run again; on any stop
 * the run waits for its in-flight steps to settle before it records the outcome, so once
 * the task shows `cancelled` no step of this run is still talking to a downstream system.
 */
export async function runTask(
  deps: RunDeps,
  taskId: string,
  stop: AbortSignal,
): Promise<RunResult> {
  // The claim and its audit event commit together: a worker killed in between leaves
  // neither, so every lease a task ever had is in the trail.
  const servable = await checkServable(deps, taskId);
  if (servable !== 'ok') return servable;
  const claim = await withTransaction(deps.pool, async (c) => {
    const claimed = await claimLease(c, taskId, deps.workerId, deps.leaseMs);
    if (claimed.kind === 'claimed') {
      await appendAudit(c, {
        type: claimed.firstStart ? 'task.started' : 'task.lease_taken',
        taskId,
        tenant: claimed.task.tenant,
        subject: claimed.task.subject,
        client: claimed.task.client,
        tool: claimed.task.tool,
        correlationId: claimed.task.correlation_id,
        actor: { subject: deps.workerId, kind: 'worker' },
        data: { worker: deps.workerId, epoch: claimed.lease.epoch, attempt: claimed.task.attempts },
      });
    }
    return claimed;
  });
  if (claim.kind !== 'claimed') return claim.kind;
  const { lease, task } = claim;
  const tool = deps.tools.get(task.tool)!.tool;
  const log = deps.logger.child({ taskId, tool: task.tool, epoch: lease.epoch });
  const auditBase = {
    taskId,
    tenant: task.tenant,
    subject: task.subject,
    client: task.client,
    tool: task.tool,
    correlationId: task.correlation_id,
  };

  const run = new AbortController();
  const onStop = () => run.abort(stop.reason ?? new StopRun('shutdown'));
  stop.addEventListener('abort', onStop, { once: true });
  if (stop.aborted) onStop();
  const inflight = new Set<Promise<unknown>>();
  let lastBoundary: Boundary | undefined;
  // atStepBoundary: a graceful shutdown (drain) stops the run only between steps, so the
  // step in flight finishes and is journaled; every other stop reason applies anywhere.
  const check = async (atStepBoundary = false): Promise<void> => {
    const b = await renewAndCheck(deps.pool, taskId, lease, deps.leaseMs);
    lastBoundary = b;
    const reason =
      boundaryStop(b) ?? (atStepBoundary && deps.drain?.aborted ? 'shutdown' : undefined);
    if (reason) run.abort(new StopRun(reason));
    if (run.signal.aborted) throw toStop(run.signal.reason);
  };
  const renewer = setInterval(
    () => {
      check().catch(() => {});
    },
    Math.max(250, Math.floor(deps.leaseMs / 3)),
  );
  renewer.unref();

  /**
   * A downstream outage (its circuit open, timeouts or 5xx after the client's own retries) is
   * not the task's failure: say so in the status message, wait, and resume from the journal.
   * The lease stays ours (renewed meanwhile); cancel, deadline, revocation and shutdown end
   * the wait at once, so the deadline bounds how long a task waits.
   */
  const executeThroughOutages = async <T>(execute: () => Promise<T>): Promise<T> => {
    for (;;) {
      try {
        return await execute();
      } catch (error) {
        if (!isDownstreamUnavailable(error) || run.signal.aborted) throw error;
        await Promise.allSettled([...inflight]);
        const message = waitingMessage(error);
        log.info('downstream unavailable; task waits', {
          downstream: error.downstream,
          code: error.code,
          retryAfterMs: error.retryAfterMs,
        });
        await recordStatusMessage(deps.pool, taskId, lease, message);
        const wait = deps.drain ? AbortSignal.any([run.signal, deps.drain]) : run.signal;
        await abortableSleep(error.retryAfterMs, wait).catch((e) => {
          throw toStop(run.signal.aborted ? run.signal.reason : e);
        });
        await check();
      }
    }
  };

  const started = Date.now();
  const downstreamSystems = new Set<string>();
  try {
    const journal = await loadJournal(deps.pool, taskId);
    let seq = journal.size;
    const targets = deps.targetsFor(task, tool);
    const clients = new Map<string, TargetClient>();
    const declared = tool.origin?.targets ?? [];
    const context: TaskContext = {
      taskId,
      owner: { tenant: task.tenant, subject: task.subject, client: task.client },
      signal: run.signal,
      logger: log,
      sleep: (ms) =>
        abortableSleep(ms, run.signal).catch((e) => {
          throw toStop(e);
        }),
      target(name) {
        if (!declared.includes(name)) {
          throw new TypeError(
            `tool ${tool.name} asked for target ${JSON.stringify(name)}, which its pack does not declare (declared: ${declared.join(', ') || 'none'})`,
          );
        }
        let client = clients.get(name);
        if (!client) {
          // Every call is preceded by a boundary check: lease, cancel, deadline and the owner's
          // revocation status, so no call starts for a stopped task.
          client = targets.client(name, {
            signal: run.signal,
            beforeCall: async () => {
              await check();
              downstreamSystems.add(name);
            },
          });
          clients.set(name, client);
        }
        return client;
      },
      async progress(current, total, message) {
        await recordProgress(deps.pool, taskId, lease, { current, total }, message);
      },
      step(name, fn) {
        if (journal.has(name)) return Promise.resolve(journal.get(name) as never);
        const p = (async () => {
          await check(true);
          if (task.needs_live_user && !(await takeStageGrant(deps.pool, taskId, lease))) {
            throw new StopRun('paused');
          }
          targets.beginStage();
          const stepStarted = new Date();
          let output;
          try {
            output = await inSpan(`step ${name}`, { attributes: { 'mtg.step': name } }, () =>
              fn(run.signal),
            );
          } catch (error) {
            if (run.signal.aborted) throw toStop(run.signal.reason);
            throw error;
          }
          const recorded = await withTransaction(deps.pool, async (c) => {
            const ok = await journalStep(c, taskId, lease, {
              name,
              seq: ++seq,
              output,
              startedAt: stepStarted,
            });
            if (ok) {
              await appendAudit(c, {
                type: 'task.step_completed',
                ...auditBase,
                data: {
                  step: name,
                  durationMs: Date.now() - stepStarted.getTime(),
                  worker: deps.workerId,
                },
              });
            }
            return ok;
          });
          if (!recorded) throw new StopRun('lease_lost');
          journal.set(name, output);
          return output;
        })();
        inflight.add(p);
        p.then(
          () => inflight.delete(p),
          () => inflight.delete(p),
        );
        return p;
      },
    };

    const structured = await executeThroughOutages(() =>
      tool.execute(context, task.arguments as never),
    );
    await check();
    return await complete(
      deps,
      tool,
      task,
      lease,
      auditBase,
      {
        content: [{ type: 'text', text: JSON.stringify(structured) }],
        structuredContent: structured,
      },
      started,
      downstreamSystems,
    );
  } catch (error) {
    // Nothing may still be running when the outcome is written.
    await Promise.allSettled([...inflight]);
    const refusal = toolRefusal(error);
    if (refusal) {
      return await complete(
        deps,
        tool,
        task,
        lease,
        auditBase,
        toolErrorResult(refusal.code, refusal.message),
        started,
        downstreamSystems,
      );
    }
    const reason =
      error instanceof StopRun
        ? error.reason
        : run.signal.aborted
          ? toStop(run.signal.reason).reason
          : undefined;
    if (reason) return await stopped(deps, task, lease, auditBase, reason, lastBoundary, log);
    if (error instanceof DelegationEnded) {
      return await fail(
        deps,
        task,
        lease,
        auditBase,
        'delegation_expired',
        `Stopped: ${error.message}`,
      );
    }
    log.warn('task attempt failed', {
      error: error instanceof Error ? error.message : String(error),
    });
    if (task.attempts < deps.maxAttempts) {
      await releaseLease(deps.pool, taskId, lease);
      return 'retry';
    }
    return await fail(
      deps,
      task,
      lease,
      auditBase,
      'failed',
      `Task failed after ${task.attempts} attempts: ${error instanceof Error ? error.message : String(error)}`,
    );
  } finally {
    clearInterval(renewer);
    stop.removeEventListener('abort', onStop);
  }
}

/**
 * The tool's own error, reported to the caller rather than retried: a non-retryable
 * ToolError, or a target that refused the request (4xx other than timeout/rate limit) and
 * will refuse it again.
 */
function toolRefusal(error: unknown): { code: string; message: string } | undefined {
  if (isToolError(error)) {
    return error.retryable ? undefined : { code: error.code, message: error.message };
  }
  const e = error as { code?: unknown; status?: unknown; message?: unknown } | null;
  // A path that would leave the target's base path is refused before any request: the same
  // arguments would be refused again.
  if (e?.code === 'invalid_target_path')
    return { code: 'invalid_target_path', message: String(e.message) };
  if (
    e?.code === 'downstream_refused' &&
    typeof e.status === 'number' &&
    e.status >= 400 &&
    e.status < 500 &&
    e.status !== 408 &&
    e.status !== 429
  ) {
    return { code: 'downstream_refused', message: String(e.message) };
  }
  return undefined;
}

/**
 * A worker runs only the tools it serves, at the schema it serves: anything else it leaves
 * alone (its queue is not this worker's, so this is a misrouted job), saying in the task's
 * status what it waits for. The job is completed rather than retried, so nothing loops; the
 * deadline sweep ends the task with that message if no fitting worker comes.
 */
async function checkServable(deps: RunDeps, taskId: string): Promise<'ok' | 'gone' | 'unservable'> {
  const r = await deps.pool.query<{ tool: string; tool_fingerprint: string | null }>(
    `SELECT tool, tool_fingerprint FROM app.tasks WHERE id = $1`,
    [taskId],
  );
  const row = r.rows[0];
  if (!row) return 'gone';
  const served = deps.tools.get(row.tool);
  if (served && (!row.tool_fingerprint || row.tool_fingerprint === served.fingerprint)) return 'ok';
  const message = `waiting for a worker that runs ${row.tool}${row.tool_fingerprint ? ` (schema ${row.tool_fingerprint.slice(0, 12)})` : ''}`;
  await deps.pool.query(
    `UPDATE app.tasks SET status_message = $2, updated_at = now()
      WHERE id = $1 AND status = 'working' AND lease_owner IS NULL`,
    [taskId, message],
  );
  deps.logger.warn('task not servable by this worker', { taskId, tool: row.tool });
  return 'unservable';
}

function boundaryStop(b: Boundary): StopReason | undefined {
  if (!b.mine) return 'lease_lost';
  if (b.revoked) return 'revoked';
  if (b.cancelRequested) return b.cancelRequestedBy?.path === 'revocation' ? 'revoked' : 'cancel';
  if (b.pastDeadline) return 'deadline';
  return undefined;
}

function toStop(reason: unknown): StopRun {
  return reason instanceof StopRun ? reason : new StopRun('shutdown');
}

async function stopped(
  deps: RunDeps,
  task: TaskRow,
  lease: Lease,
  auditBase: Record<string, string>,
  reason: StopReason,
  lastBoundary: Boundary | undefined,
  log: Logger,
): Promise<RunResult> {
  if (reason === 'lease_lost') {
    log.info('lease lost; another worker or the gateway owns the task now');
    return 'lost';
  }
  if (reason === 'paused') return pause(deps, task, lease, auditBase);
  if (reason === 'shutdown') {
    await releaseLease(deps.pool, task.id, lease);
    return 'released';
  }
  // A notification can arrive before our own boundary read: read the row's truth.
  const b = await renewAndCheck(deps.pool, task.id, lease, deps.leaseMs).catch(() => lastBoundary);
  if (!b?.mine) return 'lost';
  if (b.cancelRequested) {
    const by = (b.cancelRequestedBy ?? { path: 'owner', reason: 'cancelled' }) as Record<
      string,
      unknown
    > & { path: string };
    const ended = await withTransaction(deps.pool, async (c) => {
      const row = await settleTask(c, {
        taskId: task.id,
        status: 'cancelled',
        outcome: by.path === 'revocation' ? 'revoked' : 'cancelled',
        message: `Cancelled: ${String(by.reason ?? by.path)}`,
        endedBy: by,
        lease,
      });
      if (row) await appendCancelled(c, row, by, 'worker');
      return row;
    });
    if (ended) deps.onTaskEnded?.(ended);
    return 'settled';
  }
  if (b.revoked || reason === 'revoked') {
    const by = {
      path: 'revocation',
      via: b.revoked ? 'worker-check' : 'idp-refused-exchange',
      reason: 'principal revoked',
    };
    const ended = await withTransaction(deps.pool, async (c) => {
      const row = await settleTask(c, {
        taskId: task.id,
        status: 'cancelled',
        outcome: 'revoked',
        message: `Cancelled: principal revoked (${by.via})`,
        endedBy: by,
        lease,
      });
      if (row) await appendCancelled(c, row, by, 'worker');
      return row;
    });
    if (ended) deps.onTaskEnded?.(ended);
    return 'settled';
  }
  if (b.pastDeadline || reason === 'deadline') {
    return fail(
      deps,
      task,
      lease,
      auditBase,
      'deadline',
      `Deadline exceeded (${task.deadline.toISOString()}); the task was stopped`,
    );
  }
  // Aborted without a recorded reason (e.g. notification for a cancel that lost a race):
  // give the lease back so the job resumes.
  await releaseLease(deps.pool, task.id, lease);
  return 'retry';
}

/** Checkpoint mode: one stage per grant; a stage without one waits for a live user. */
async function takeStageGrant(pool: Pool, taskId: string, lease: Lease): Promise<boolean> {
  const r = await pool.query(
    `UPDATE app.tasks SET stage_grants = stage_grants - 1
      WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 AND stage_grants > 0`,
    [taskId, lease.owner, lease.epoch],
  );
  return r.rowCount === 1;
}

async function pause(
  deps: RunDeps,
  task: TaskRow,
  lease: Lease,
  auditBase: Record<string, string>,
): Promise<RunResult> {
  await withTransaction(deps.pool, async (c) => {
    const r = await c.query(
      `UPDATE app.tasks SET status = 'input_required', lease_owner = NULL, lease_expires_at = NULL,
              status_message = 'Waiting for the owner: this tool needs a live user at each stage. Poll the task with a fresh token to continue.',
              updated_at = now()
        WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 AND status = 'working'`,
      [task.id, lease.owner, lease.epoch],
    );
    if (r.rowCount === 1) {
      await appendAudit(c, {
        type: 'task.paused',
        ...auditBase,
        reason: 'live_user_required',
        data: { worker: deps.workerId },
      });
    }
  });
  return 'paused';
}

async function fail(
  deps: RunDeps,
  task: TaskRow,
  lease: Lease,
  auditBase: Record<string, string>,
  outcome: string,
  message: string,
): Promise<RunResult> {
  const ended = await withTransaction(deps.pool, async (c) => {
    const row = await settleTask(c, {
      taskId: task.id,
      status: 'failed',
      outcome,
      message,
      endedBy: { path: outcome === 'deadline' ? 'deadline' : 'worker', worker: deps.workerId },
      lease,
    });
    if (row) {
      await appendAudit(c, {
        type: 'task.failed',
        ...auditBase,
        reason: outcome,
        data: {
          message,
          durationMs: row.ended_at!.getTime() - row.created_at.getTime(),
          attempts: row.attempts,
        },
      });
    }
    return row;
  });
  if (ended) deps.onTaskEnded?.(ended);
  return 'settled';
}

async function complete(
  deps: RunDeps,
  tool: LongToolDefinition,
  task: TaskRow,
  lease: Lease,
  auditBase: Record<string, string>,
  result: { content: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean },
  started: number,
  downstreamSystems: Set<string>,
): Promise<RunResult> {
  const text = JSON.stringify(result);
  const size = Buffer.byteLength(text);
  if (size > tool.limits.maxResultBytes) {
    return fail(
      deps,
      task,
      lease,
      auditBase,
      'result_too_large',
      `Result of ${size} bytes exceeds the ${tool.limits.maxResultBytes}-byte limit of ${tool.name}`,
    );
  }
  const settled = await withTransaction(deps.pool, async (c) => {
    const stored = await c.query(
      `INSERT INTO app.task_results (task_id, result, is_error, size_bytes, expires_at, delete_on_read)
       SELECT id, $4, $5, $6, now() + ttl_ms * interval '1 millisecond', $7 FROM app.tasks
        WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 AND status IN ('working', 'input_required')`,
      [
        task.id,
        lease.owner,
        lease.epoch,
        text,
        result.isError === true,
        size,
        tool.limits.deleteResultOnRead,
      ],
    );
    if (stored.rowCount !== 1) return undefined;
    const row = await settleTask(c, {
      taskId: task.id,
      status: 'completed',
      outcome: result.isError ? 'tool_error' : 'completed',
      message: result.isError ? 'Completed with a tool error' : 'Completed',
      endedBy: { path: 'worker', worker: deps.workerId },
      lease,
    });
    if (!row) throw new Error('settle refused after a fenced result insert'); // rolls back
    await appendAudit(c, {
      type: 'task.completed',
      ...auditBase,
      reason: result.isError ? 'tool_error' : 'success',
      data: {
        outcome: result.isError ? 'tool_error' : 'success',
        durationMs: row.ended_at!.getTime() - row.created_at.getTime(),
        runMs: Date.now() - started,
        resultBytes: size,
        downstreamSystems: [...downstreamSystems],
        attempts: row.attempts,
      },
    });
    return row;
  });
  if (settled) deps.onTaskEnded?.(settled);
  return settled ? 'settled' : 'lost';
}

function waitingMessage(error: DownstreamUnavailable): string {
  const seconds = Math.max(1, Math.round(error.retryAfterMs / 1000));
  return `waiting: downstream ${error.downstream} unavailable (${describeUnavailable(error.code)}), retrying in ${seconds}s`;
}

/** The status message alone, fenced like every other write. */
async function recordStatusMessage(
  pool: Pool,
  taskId: string,
  lease: Lease,
  message: string,
): Promise<void> {
  await pool.query(
    `UPDATE app.tasks SET status_message = $4, updated_at = now()
      WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 AND status = 'working'`,
    [taskId, lease.owner, lease.epoch, message],
  );
}
