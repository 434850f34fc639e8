import { RESULT_GONE, type TaskReading, type TaskView } from '@mtg/tasks';

/**
 * The one mapping from the task service's view of a task to each wire's shape. Adapters
 * (legacy-server.ts, modern-server.ts, fast-tasks-get.ts, job-tools.ts) call these and build
 * no task object of their own, so every wire shows the same task the same way.
 */

/** The 2025-11-25 core `Task` (tasks/get, tasks/list, tasks/cancel, CreateTaskResult.task). */
export function coreTask(t: TaskView) {
  return {
    taskId: t.taskId,
    status: t.status,
    ttl: t.ttlMs,
    createdAt: t.createdAt,
    lastUpdatedAt: t.lastUpdatedAt,
    pollInterval: t.pollIntervalMs,
    ...(t.statusMessage ? { statusMessage: t.statusMessage } : {}),
  };
}

/** The fields every 2026-07-28 task object carries. */
function extTask(t: TaskView) {
  return {
    taskId: t.taskId,
    status: t.status,
    ...(t.statusMessage ? { statusMessage: t.statusMessage } : {}),
    createdAt: t.createdAt,
    lastUpdatedAt: t.lastUpdatedAt,
    ttlMs: t.ttlMs,
    pollIntervalMs: t.pollIntervalMs,
  };
}

/** The 2026-07-28 `CreateTaskResult` of a task-augmented tools/call. */
export function createdExtTask(t: TaskView) {
  return { resultType: 'task', ...extTask(t) };
}

/**
 * The 2026-07-28 `DetailedTask` of `tasks/get`: the task, with the final result or error
 * inlined. The status is always the task's own: a completed task whose result is gone is
 * still `completed`, its `result` an `isError` tool result saying the result is gone (the
 * extension requires a result object on every completed task).
 */
export function detailedExtTask(r: TaskReading) {
  const task = r.task;
  const base = { resultType: 'complete', ...extTask(task) };
  if (task.status === 'completed') {
    const stored = r.result === 'gone' || r.result === undefined ? undefined : r.result;
    return {
      ...base,
      result: stored
        ? { resultType: 'complete', ...stored.result }
        : {
            resultType: 'complete',
            content: [{ type: 'text', text: RESULT_GONE.message }],
            isError: true,
            structuredContent: { error: 'result_gone' },
          },
    };
  }
  if (task.status === 'failed') {
    return {
      ...base,
      error: {
        code: -32603,
        message: task.statusMessage ?? 'Task failed',
        data: { outcome: task.outcome },
      },
    };
  }
  if (task.status === 'input_required')
    return { ...base, inputRequests: task.input ? inputRequestsOf(task.input) : {} };
  return base;
}

/** The job tools' `structuredContent` for a job: the task view, with its id as `jobId`. */
export function jobView(t: TaskView) {
  return { ...t, jobId: t.taskId };
}

/**
 * A question the task is parked on, as the protocol's form-mode elicitation request keyed by
 * the question's name: 2026 `inputRequests` (answered with tasks/update `inputResponses`
 * under the same key) and, as `params`, the 2025-11-25 `elicitation/create` request.
 */
export function elicitationOf(input: NonNullable<TaskView['input']>, taskId?: string) {
  return {
    method: 'elicitation/create' as const,
    params: {
      mode: 'form' as const,
      message: input.message,
      requestedSchema: input.requestedSchema,
      ...(taskId ? { _meta: { 'io.modelcontextprotocol/related-task': { taskId } } } : {}),
    },
  };
}

function inputRequestsOf(input: NonNullable<TaskView['input']>) {
  return { [input.key]: elicitationOf(input) };
}
