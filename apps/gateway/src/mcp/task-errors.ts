import type { TaskError } from '@mtg/tasks';

/** JSON-RPC error for a task verb failure: one mapping for every wire. */
export function rpcErrorFor(error: TaskError): {
  code: number;
  message: string;
  data?: Record<string, unknown>;
} {
  switch (error.code) {
    case 'user_limit':
    case 'tenant_limit':
    case 'delegation_unavailable':
    case 'rate_limited':
    case 'result_wait_limit':
    case 'unavailable':
      // Implementation-defined server error: a limit, with when to retry.
      return {
        code: -32000,
        message: error.message,
        data: { reason: error.code, retryAfterSeconds: error.retryAfterSeconds ?? 5 },
      };
    case 'insufficient_scope':
      return {
        code: -32602,
        message: error.message,
        data: { reason: error.code, scope: error.scope },
      };
    case 'task_not_found':
      return { code: -32602, message: 'Task not found' };
    default:
      return { code: -32602, message: error.message, data: { reason: error.code } };
  }
}
