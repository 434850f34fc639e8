/** Expected failures of the task verbs. Adapters map each code to their wire's error. */
export type TaskErrorCode =
  | 'task_not_found' // missing, foreign, or beyond retention: one answer for all
  | 'insufficient_scope' // the owner's current token lacks the tool's scope
  | 'idempotency_conflict' // same key, different tool or arguments
  | 'user_limit' // too many active tasks for this subject
  | 'tenant_limit' // too many active tasks in this tenant
  | 'task_terminal' // cancel of a finished task
  | 'result_not_ready'
  | 'result_gone' // retention passed or deleted on an earlier read
  | 'principal_revoked'
  | 'delegation_refused' // the IdP would not delegate (e.g. the user is disabled)
  | 'delegation_unavailable' // the IdP could not be reached
  | 'rate_limited' // the caller's start or poll rate is over its limit (gateway)
  | 'result_wait_limit' // the caller already holds its cap of blocking result reads (gateway)
  | 'unavailable' // PostgreSQL cannot be reached right now: nothing was done, retry
  | 'approval_refused' // the requester may not decide their own task's approval
  | 'invalid_params'; // a verb's input is malformed (e.g. a forged list cursor): nothing was done

export interface TaskError {
  ok: false;
  code: TaskErrorCode;
  message: string;
  retryAfterSeconds?: number;
  scope?: string;
}

export type TaskOutcome<T> = ({ ok: true } & T) | TaskError;

export function taskError(
  code: TaskErrorCode,
  message: string,
  extra: Partial<Pick<TaskError, 'retryAfterSeconds' | 'scope'>> = {},
): TaskError {
  return { ok: false, code, message, ...extra };
}

/** The single answer for a task the caller may not see, whatever the reason. */
export const NOT_FOUND = taskError('task_not_found', 'Task not found');

/** A completed task whose result retention passed or a delete-on-read retrieval took. */
export const RESULT_GONE = taskError(
  'result_gone',
  'The result is no longer stored (retention passed or it was already retrieved)',
);
