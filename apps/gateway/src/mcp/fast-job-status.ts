import type { Request } from 'express';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type Dispatch } from './dispatch.ts';
import { coreStateless, isObj, validId, type FastAnswer } from './fast-wire.ts';

/**
 * The jobId of a 2025-11-25 `tools/call` of `get_job_status` exactly as the v1 SDK's client
 * sends it to a stateless server after `initialize`: params `name` and `arguments` alone
 * (no `_meta`, no `task`), arguments `{ jobId: <string> }` alone, the request as
 * coreStateless takes it. Undefined for anything else, which the SDK answers as it would.
 */
export function coreJobStatus(req: Request): { id: string | number; jobId: string } | undefined {
  const body: unknown = req.body;
  if (!isObj(body) || body.jsonrpc !== '2.0' || body.method !== 'tools/call') return undefined;
  if (!validId(body.id) || !coreStateless(req)) return undefined;
  const params = body.params;
  if (!isObj(params) || params.name !== 'get_job_status' || Object.keys(params).length !== 2)
    return undefined;
  const args = params.arguments;
  if (!isObj(args) || typeof args.jobId !== 'string' || Object.keys(args).length !== 1)
    return undefined;
  return { id: body.id, jobId: args.jobId };
}

/**
 * `get_job_status` — the job tools' poll, the hottest call of a client without tasks —
 * without the v1 SDK's per-request Server and transport. The call is the one the SDK's
 * handler makes (legacy-server.ts: `dispatch.callTool`, plain mode, wire `plain-2025`), so
 * the per-tool policy, the scope, the verb's authorization, rate limit and audit are the
 * same, and so is the answer: test/e2e/fast-tasks-get.test.ts compares the two paths.
 */
export async function fastJobStatus(
  dispatch: Dispatch,
  req: Request,
  request: RequestContext,
): Promise<FastAnswer | undefined> {
  const call = coreJobStatus(req);
  if (!call) return undefined;
  const ctx = callContextFrom(request, undefined, 'plain-2025');
  const outcome = await dispatch.callTool(
    { name: 'get_job_status', arguments: { jobId: call.jobId } },
    { kind: 'plain' },
    ctx,
  );
  if (outcome.kind === 'error') {
    const { code, message, data } = outcome;
    return { id: call.id, error: { code, message, ...(data !== undefined ? { data } : {}) } };
  }
  if (outcome.kind === 'task') throw new Error('get_job_status started a task');
  return { id: call.id, result: { ...outcome.result } };
}
