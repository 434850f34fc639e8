import { JOB_TOOL_VERBS } from './job-tools.ts';

/**
 * Whether a parsed MCP request body reads a task's status or result — the requests the poll
 * limit counts (the verbs `get`, `read`, `result` and `awaitResult`): one JSON-RPC request
 * (not a batch) of `tasks/get` or `tasks/result` on any wire, or a `tools/call` of a job tool
 * that reads (`get_job_status`, `get_job_result`). The check runs before the request is
 * routed, so its poll can be counted in the same statement as the revocation check
 * (rejectRevoked); a request that is refused before its verb has still spent one poll.
 */
export function isPollRequest(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const { method, params } = body as { method?: unknown; params?: unknown };
  if (method === 'tasks/get' || method === 'tasks/result') return true;
  if (method !== 'tools/call' || typeof params !== 'object' || params === null) return false;
  const name = (params as { name?: unknown }).name;
  const verb =
    typeof name === 'string' && Object.hasOwn(JOB_TOOL_VERBS, name)
      ? JOB_TOOL_VERBS[name]
      : undefined;
  return verb === 'get' || verb === 'result';
}
