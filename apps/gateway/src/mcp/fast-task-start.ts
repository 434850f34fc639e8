import type { Request } from 'express';
import { progressTokenOf, toView } from '@mtg/tasks';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type CallMode, type Dispatch, type DispatchOutcome } from './dispatch.ts';
import {
  coreStateless,
  isObj,
  modernFraming,
  progressTokenAlone,
  validId,
  type FastAnswer,
  type Obj,
} from './fast-wire.ts';
import { WIRE_2025 } from './legacy-server.ts';
import { WIRE_2026 } from './modern-server.ts';
import { SERVER_INFO } from './server-info.ts';
import { coreTask, createdExtTask } from './task-shapes.ts';

/** A start the fast path takes: the tool, its arguments, the request's `_meta` and mode. */
export interface TaskStartCall {
  id: string | number;
  name: string;
  arguments: Obj | undefined;
  meta: Obj | undefined;
  wire: '2026' | '2025';
  /** 2025 only: the `task` param's ttl. */
  ttlMs?: number;
}

/** Only these keys, each optional: the request would look different to the SDK otherwise. */
const only = (o: Obj, keys: readonly string[]) => Object.keys(o).every((k) => keys.includes(k));

/**
 * A JSON-RPC `tools/call` of a long tool whose params hold only `keys` (each optional), with a
 * string `name` and `arguments` absent or an object: what either wire's start must be first.
 */
function longToolCall(
  req: Request,
  isLongTool: (name: string) => boolean,
  keys: readonly string[],
): { id: string | number; name: string; arguments: Obj | undefined; params: Obj } | undefined {
  const body: unknown = req.body;
  if (!isObj(body) || body.jsonrpc !== '2.0' || body.method !== 'tools/call') return undefined;
  if (!validId(body.id)) return undefined;
  const params = body.params;
  if (!isObj(params) || !only(params, keys)) return undefined;
  if (typeof params.name !== 'string' || !isLongTool(params.name)) return undefined;
  if (params.arguments !== undefined && !isObj(params.arguments)) return undefined;
  return { id: body.id, name: params.name, arguments: params.arguments, params };
}

/**
 * A 2026-07-28 `tools/call` of a long tool with the tasks extension declared, exactly as a
 * conforming client sends it (the envelope, MCP-Protocol-Version / Mcp-Method / Mcp-Name
 * agreeing with the body, JSON accepted; params `name`, `arguments` and `_meta` alone), or
 * undefined for anything else, which the SDK answers as it would.
 */
export function plainTaskStart(
  req: Request,
  isLongTool: (name: string) => boolean,
): TaskStartCall | undefined {
  const call = longToolCall(req, isLongTool, ['name', 'arguments', '_meta']);
  if (!call) return undefined;
  const meta = call.params._meta;
  if (!isObj(meta) || !modernFraming(req, meta, 'tools/call', call.name)) return undefined;
  return { id: call.id, name: call.name, arguments: call.arguments, meta, wire: '2026' };
}

/**
 * A 2025-11-25 task-augmented `tools/call` of a long tool as the v1 SDK's client sends it to
 * a stateless server (coreStateless): params `name`, `arguments`, `task` (`{}` or a whole
 * positive `ttl`) and at most a `_meta` holding a progress token; or undefined for anything
 * else, which the SDK answers as it would (a bad ttl, a plain call, another revision …).
 */
export function coreTaskStart(
  req: Request,
  isLongTool: (name: string) => boolean,
): TaskStartCall | undefined {
  if (!coreStateless(req)) return undefined;
  const call = longToolCall(req, isLongTool, ['name', 'arguments', 'task', '_meta']);
  if (!call) return undefined;
  const task = call.params.task;
  if (!isObj(task) || !only(task, ['ttl'])) return undefined;
  const ttl = task.ttl;
  if (ttl !== undefined && !(typeof ttl === 'number' && Number.isSafeInteger(ttl) && ttl > 0))
    return undefined;
  const meta = call.params._meta;
  if (meta !== undefined && !progressTokenAlone(meta)) return undefined;
  return {
    id: call.id,
    name: call.name,
    arguments: call.arguments,
    meta,
    wire: '2025',
    ...(ttl !== undefined ? { ttlMs: ttl } : {}),
  };
}

// Each request is recognized once: rejectRevoked asks before the route runs (to count the
// start beside its revocation check), and the route takes the same answer.
const recognized = new WeakMap<Request, TaskStartCall | null>();
function taskStartOf(
  req: Request,
  isLongTool: (name: string) => boolean,
): TaskStartCall | undefined {
  let call = recognized.get(req);
  if (call === undefined) {
    call = plainTaskStart(req, isLongTool) ?? coreTaskStart(req, isLongTool) ?? null;
    recognized.set(req, call);
  }
  return call ?? undefined;
}

/** Whether fastTaskStart takes this request (before the route runs: rejectRevoked's counts). */
export const isFastTaskStart = (req: Request, isLongTool: (name: string) => boolean): boolean =>
  taskStartOf(req, isLongTool) !== undefined;

/**
 * A 2026-07-28 tools/call result as the v2 SDK's server sends it: `content: []` added to a
 * result without content (its normalization of tool results), `resultType` `complete` unless
 * given, and the server's identity in `_meta` (its 2026 encoding of every result).
 */
function as2026Result(result: Obj): Obj {
  const contentless = result.content === undefined && !FOREIGN_FAMILY.some((k) => k in result);
  return {
    resultType: 'complete',
    ...result,
    ...(contentless ? { content: [] } : {}),
    _meta: { ...(result._meta as Obj | undefined), [SERVER_INFO_META]: SERVER_INFO },
  };
}
const FOREIGN_FAMILY = ['task', 'inputRequests', 'requestState'];
const SERVER_INFO_META = 'io.modelcontextprotocol/serverInfo';

function errorAnswer(id: string | number, outcome: Extract<DispatchOutcome, { kind: 'error' }>) {
  const { code, message, data } = outcome;
  return { id, error: { code, message, ...(data !== undefined ? { data } : {}) } };
}

/**
 * A long tool started as a task — the call every task begins with — without the SDK's
 * per-request server, on the 2026-07-28 wire (tasks extension) and the 2025-11-25 wire (a
 * task-augmented call of the v1 SDK). The call is the one the SDK's handlers make
 * (modern-server.ts, legacy-server.ts): `dispatch.callTool` in the same mode and wire, so
 * the per-tool policy, the scope, the idempotency key, the argument check, the rate limits,
 * the admission and the audit are the same, and so is the answer:
 * test/e2e/fast-task-start.test.ts compares the two paths. Undefined, having done nothing,
 * for any request it does not take.
 */
export async function fastTaskStart(
  dispatch: Dispatch,
  req: Request,
  request: RequestContext,
): Promise<FastAnswer | undefined> {
  const call = taskStartOf(req, dispatch.isLongTool);
  if (!call) return undefined;
  const modern = call.wire === '2026';
  const progressToken = modern ? undefined : progressTokenOf(call.meta);
  const mode: CallMode = modern
    ? { kind: 'ext-task' }
    : {
        kind: 'core-task',
        ...(call.ttlMs !== undefined ? { ttlMs: call.ttlMs } : {}),
        ...(progressToken !== undefined ? { progressToken } : {}),
      };
  const outcome = await dispatch.callTool(
    { name: call.name, ...(call.arguments !== undefined ? { arguments: call.arguments } : {}) },
    mode,
    callContextFrom(request, call.meta, modern ? WIRE_2026 : WIRE_2025),
  );
  if (outcome.kind === 'error') return errorAnswer(call.id, outcome);
  if (outcome.kind === 'task') {
    const view = toView(outcome.task);
    const result = modern ? as2026Result(createdExtTask(view)) : { task: coreTask(view) };
    return { id: call.id, result };
  }
  if (modern) return { id: call.id, result: as2026Result({ ...outcome.result }) };
  // As legacy-server.ts: a task-augmented call answers CreateTaskResult or a JSON-RPC error;
  // invalid arguments (nothing was created) are the latter.
  const text = outcome.result.content.map((c) => c.text).join(' ');
  const data = outcome.result.structuredContent;
  return { id: call.id, error: { code: -32602, message: text, ...(data ? { data } : {}) } };
}
