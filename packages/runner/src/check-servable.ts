import { noteWaitingForWorker } from '@mtg/tasks';
import type { RunDeps, ServedTool } from './run-task.ts';

/**
 * Tool name → the schema fingerprint this worker runs it at (what the claim checks), read at
 * each claim: the worker's map changes while it runs (upstream task tools come and go with
 * the stored catalogue, worker-upstreams.ts).
 */
export function servedFingerprints(tools: ReadonlyMap<string, ServedTool>): Map<string, string> {
  return new Map([...tools].map(([name, t]) => [name, t.fingerprint]));
}

/**
 * A worker runs only the tools it serves, at the schema it serves: anything else it leaves
 * alone, unclaimed (its queue is not this worker's, so this is a misrouted job), saying in the
 * task's status what it waits for. The job is completed rather than retried, so nothing loops;
 * the deadline sweep ends the task with that message if no fitting worker comes.
 */
export async function leaveUnservable(
  deps: Pick<RunDeps, 'pool' | 'logger'>,
  taskId: string,
  task: { tool: string; toolFingerprint: string | null },
): Promise<'unservable'> {
  await noteWaitingForWorker(
    deps.pool,
    taskId,
    `waiting for a worker that runs ${task.tool}${task.toolFingerprint ? ` (schema ${task.toolFingerprint.slice(0, 12)})` : ''}`,
  );
  deps.logger.warn('task not servable by this worker', { taskId, tool: task.tool });
  return 'unservable';
}
