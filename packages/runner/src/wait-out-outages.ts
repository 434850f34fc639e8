import type { Logger } from '@mtg/log';
import { recordStatusMessage, type Lease } from '@mtg/tasks';
import {
  describeUnavailable,
  isDownstreamUnavailable,
  type DownstreamUnavailable,
} from '@mtg/tools';
import type { RunBoundary } from './run-boundary.ts';
import { toStop } from './run-boundary.ts';
import type { RunDeps } from './run-task.ts';
import { abortableSleep } from './stop.ts';

/**
 * A downstream outage (its circuit open, timeouts or 5xx after the client's own retries) is
 * not the task's failure: say so in the status message, wait, and resume from the journal.
 * The lease stays ours (renewed meanwhile); cancel, deadline, revocation and shutdown end
 * the wait at once, so the deadline bounds how long a task waits.
 */
export async function executeThroughOutages<T>(
  deps: Pick<RunDeps, 'pool' | 'drain'>,
  run: RunBoundary,
  held: { taskId: string; lease: Lease; log: Logger },
  execute: () => Promise<T>,
): Promise<T> {
  for (;;) {
    try {
      return await execute();
    } catch (error) {
      if (!isDownstreamUnavailable(error) || run.signal.aborted) throw error;
      await run.quiesce();
      held.log.info('downstream unavailable; task waits', {
        downstream: error.downstream,
        code: error.code,
        retryAfterMs: error.retryAfterMs,
      });
      await recordStatusMessage(deps.pool, held.taskId, held.lease, waitingMessage(error));
      const wait = deps.drain ? AbortSignal.any([run.signal, deps.drain]) : run.signal;
      await abortableSleep(error.retryAfterMs, wait).catch((e) => {
        throw toStop(run.signal.aborted ? run.signal.reason : e);
      });
      await run.check();
    }
  }
}

function waitingMessage(error: DownstreamUnavailable): string {
  const seconds = Math.max(1, Math.round(error.retryAfterMs / 1000));
  return `waiting: downstream ${error.downstream} unavailable (${describeUnavailable(error.code)}), retrying in ${seconds}s`;
}
