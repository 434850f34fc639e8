import type { Logger } from '@mtg/log';
import {
  cancelTaskNow,
  completeTask,
  failTask,
  pauseTask,
  releaseLease,
  renewLease,
  type CancelledBy,
  type Lease,
  type PendingProgress,
  type TaskRow,
} from '@mtg/tasks';
import type { LongToolDefinition } from '@mtg/tools';
import type { RunDeps, RunResult } from './run-task.ts';
import type { DeferredStep } from './deferred-steps.ts';
import type { RunBoundary } from './run-boundary.ts';
import type { StopReason } from './stop.ts';

/** One run's handle on its task: which task, under which lease, for which tool. */
export interface Held {
  task: TaskRow;
  lease: Lease;
  tool: LongToolDefinition;
}

type ToolResultShape = {
  content: unknown[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
};

const ends = (deps: RunDeps) => ({
  pool: deps.pool,
  ...(deps.onTaskEnded ? { onTaskEnded: deps.onTaskEnded } : {}),
});

/** The tool finished (or refused): its result, unless it is over the tool's limit. */
export async function finish(
  deps: RunDeps,
  h: Held,
  result: ToolResultShape,
  run: {
    startedAt: number;
    downstreamSystems: Set<string>;
    progress?: PendingProgress;
    /** The run's last step, not journaled yet: the completion journals it. */
    step?: DeferredStep | undefined;
    /** The run's end: the completion settles only if no stop stands (completeTask). */
    atBoundary?: boolean;
    /**
     * The end's boundary check, for an ending that does not read it itself (a result over
     * the limit): throws the stop that stands, which then ends the run instead.
     */
    checkBoundary?: () => Promise<void>;
  },
): Promise<RunResult> {
  const text = JSON.stringify(result);
  const size = Buffer.byteLength(text);
  const { progress } = run;
  if (size > h.tool.limits.maxResultBytes) {
    // The step happened: journaled (with its event) before the failure is written.
    const b = await run.step?.write(undefined);
    if (b && !b.mine) return 'lost';
    await run.checkBoundary?.();
    return fail(
      deps,
      h,
      'result_too_large',
      `Result of ${size} bytes exceeds the ${h.tool.limits.maxResultBytes}-byte limit of ${h.tool.name}`,
      progress,
    );
  }
  // pg-boss's completion of the job rides on the ending; without it the loop completes the
  // job after (as for every other ending).
  const job = await deps.job?.completion();
  const settled = await completeTask(ends(deps), {
    taskId: h.task.id,
    lease: h.lease,
    workerId: deps.workerId,
    finished: { result, text, sizeBytes: size, deleteOnRead: h.tool.limits.deleteResultOnRead },
    runMs: Math.round(performance.now() - run.startedAt),
    downstreamSystems: [...run.downstreamSystems],
    ...(progress ? { progress } : {}),
    ...(job ? { job } : {}),
    ...(run.step ? { step: run.step.step } : {}),
    ...(run.atBoundary ? { atBoundary: true } : {}),
  });
  if (settled && job) deps.job!.completed = true;
  return settled ? 'settled' : 'lost';
}

export async function fail(
  deps: RunDeps,
  h: Held,
  outcome: string,
  message: string,
  progress?: PendingProgress,
): Promise<RunResult> {
  await failTask(ends(deps), {
    taskId: h.task.id,
    lease: h.lease,
    workerId: deps.workerId,
    outcome,
    message,
    ...(progress ? { progress } : {}),
  });
  return 'settled';
}

/** Gives the lease back so pg-boss hands the job out again (shutdown, or a retry). */
export async function release(deps: RunDeps, h: Held, result: 'released' | 'retry') {
  await releaseLease(deps.pool, h.task.id, h.lease);
  return result;
}

/** The run was stopped (a boundary, a notification, shutdown): record why. */
export async function stopped(
  deps: RunDeps,
  h: Held,
  reason: StopReason,
  run: RunBoundary,
  log: Logger,
): Promise<RunResult> {
  if (reason === 'lease_lost') {
    log.info('lease lost; another worker or the gateway owns the task now');
    return 'lost';
  }
  if (reason === 'lease_expired') {
    // Nothing can be written (the database is out of reach, or was): pg-boss retries the job,
    // and whichever worker claims it once the lease has expired resumes from the journal.
    log.warn('lease deadline passed without a renewal; run stopped before the lease could expire');
    return 'expired';
  }
  if (reason === 'paused') {
    await pauseTask(deps.pool, { task: h.task, lease: h.lease, workerId: deps.workerId });
    return 'paused';
  }
  if (reason === 'awaiting_input') return 'paused';
  if (reason === 'shutdown') return release(deps, h, 'released');
  // A notification can arrive before our own boundary read: read the row's truth.
  const b = await renewLease(deps.pool, h.task.id, h.lease, deps.leaseMs).catch(() => run.last);
  if (!b?.mine) return 'lost';
  if (b.cancelRequested) {
    const by = (b.cancelRequestedBy ?? { path: 'owner', reason: 'cancelled' }) as CancelledBy;
    await cancelTaskNow(ends(deps), {
      taskId: h.task.id,
      by,
      message: `Cancelled: ${String(by.reason ?? by.path)}`,
      settledBy: 'worker',
      lease: h.lease,
    });
    return 'settled';
  }
  if (b.revoked || reason === 'revoked') {
    const by = {
      path: 'revocation',
      via: b.revoked ? 'worker-check' : 'idp-refused-exchange',
      reason: 'principal revoked',
    };
    await cancelTaskNow(ends(deps), {
      taskId: h.task.id,
      by,
      message: `Cancelled: principal revoked (${by.via})`,
      settledBy: 'worker',
      lease: h.lease,
    });
    return 'settled';
  }
  if (b.pastDeadline || reason === 'deadline') {
    return fail(
      deps,
      h,
      'deadline',
      `Deadline exceeded (${h.task.deadline.toISOString()}); the task was stopped`,
    );
  }
  // Aborted without a recorded reason (e.g. notification for a cancel that lost a race):
  // give the lease back so the job resumes.
  return release(deps, h, 'retry');
}
