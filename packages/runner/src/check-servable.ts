import { noteWaitingForWorker, placementOf } from '@mtg/tasks';
import type { RunDeps } from './run-task.ts';

/**
 * A worker runs only the tools it serves, at the schema it serves: anything else it leaves
 * alone (its queue is not this worker's, so this is a misrouted job), saying in the task's
 * status what it waits for. The job is completed rather than retried, so nothing loops; the
 * deadline sweep ends the task with that message if no fitting worker comes.
 */
export async function checkServable(
  deps: Pick<RunDeps, 'pool' | 'tools' | 'logger'>,
  taskId: string,
): Promise<'ok' | 'gone' | 'unservable'> {
  const row = await placementOf(deps.pool, taskId);
  if (!row) return 'gone';
  const served = deps.tools.get(row.tool);
  if (served && (!row.tool_fingerprint || row.tool_fingerprint === served.fingerprint)) return 'ok';
  await noteWaitingForWorker(
    deps.pool,
    taskId,
    `waiting for a worker that runs ${row.tool}${row.tool_fingerprint ? ` (schema ${row.tool_fingerprint.slice(0, 12)})` : ''}`,
  );
  deps.logger.warn('task not servable by this worker', { taskId, tool: row.tool });
  return 'unservable';
}
