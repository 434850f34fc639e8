import type { NextFunction, Request, Response } from 'express';
import type { Pool } from '@mtg/db';
import { createDenialFold, stepUpScope } from '@mtg/tasks';
import type { LongToolDefinition } from '@mtg/tools';
import { JOB_TOOL_VERBS } from '../mcp/job-tools.ts';
import { TASKS_EXTENSION, WIRE_2026 } from '../mcp/modern-server.ts';
import type { ToolPolicy } from '../mcp/tool-policy.ts';
import { refuseScope } from './authenticate.ts';
import { requestContextOf } from './request-context.ts';

const PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

type Verb = 'get' | 'result' | 'cancel' | 'answer';
// The task verb behind each method, as modern-server.ts and legacy-server.ts route them.
const MODERN_VERBS = new Map<unknown, Verb>([
  ['tasks/get', 'get'],
  ['tasks/update', 'get'],
  ['tasks/cancel', 'cancel'],
]);
const CORE_VERBS = new Map<unknown, Verb>([
  ['tasks/get', 'get'],
  ['tasks/result', 'result'],
  ['tasks/cancel', 'cancel'],
]);
// A Map, not an object lookup: a method or tool named "constructor" must find nothing.
const JOB_VERBS = new Map<unknown, Verb>(Object.entries(JOB_TOOL_VERBS));

/** The task verb a single JSON-RPC request would run, as the MCP handlers route it. */
export function taskVerbOf(
  body: unknown,
): { verb: Verb; taskId: string; wire: string; jobTool?: string } | undefined {
  if (!isObj(body) || typeof body.method !== 'string' || !isObj(body.params)) return undefined;
  const params = body.params;
  const meta = isObj(params._meta) ? params._meta : {};
  const modern = typeof meta[PROTOCOL_VERSION] === 'string';
  if (body.method === 'tools/call') {
    const verb = JOB_VERBS.get(params.name);
    const args = params.arguments;
    if (!verb || params.task !== undefined || !isObj(args) || typeof args.jobId !== 'string')
      return undefined;
    return { verb, taskId: args.jobId, wire: 'job-tools', jobTool: params.name as string };
  }
  if (typeof params.taskId !== 'string') return undefined;
  if (modern) {
    // Without the extension declared the v2 server answers -32021 before any verb runs.
    const caps = meta[CLIENT_CAPABILITIES];
    if (!isObj(caps) || !isObj(caps.extensions) || caps.extensions[TASKS_EXTENSION] === undefined)
      return undefined;
    const verb = MODERN_VERBS.get(body.method);
    return verb && { verb, taskId: params.taskId, wire: WIRE_2026 };
  }
  const verb = CORE_VERBS.get(body.method);
  return verb && { verb, taskId: params.taskId, wire: 'core-2025' };
}

/**
 * Step-up for the task verbs (MCP authorization, "Scope challenge handling"): a request
 * for one of the caller's own tasks whose tool scope the token lacks gets HTTP 403
 * `insufficient_scope` naming the scope, on every wire (tasks/get|result|cancel|update and
 * the job tools), as `tools/call` of that tool would. A foreign, missing or policy-refused
 * task is left to the verb and its single not-found answer. A token that holds every long
 * tool's scope has nothing to step up to and costs no query (polling is the hot path).
 * A 2025-03-26 batch is left to the verbs, which answer in band (docs/tasks.md).
 */
export function requireTaskScope(options: {
  pool: Pool;
  longTools: ReadonlyMap<string, LongToolDefinition>;
  toolPolicy?: ToolPolicy;
  resourceMetadataUrl: string;
  onDenied?: (reason: string) => void;
  /** Where a failure to write a folded denial summary is reported. */
  onSummaryFailed?: (error: Error) => void;
}) {
  // One owner's repeated step-up denials fold like every task denial (fold-denials.ts).
  const denials = createDenialFold({
    pool: options.pool,
    windowMs: 60_000,
    onSummaryFailed: options.onSummaryFailed ?? (() => {}),
  });
  const scopeOf = (tool: string) => options.longTools.get(tool)?.scope;
  const scopes = [...new Set([...options.longTools.values()].map((t) => t.scope))];
  return async (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'POST') return next();
    const target = taskVerbOf(req.body);
    if (!target) return next();
    const { principal, workload, correlationId } = requestContextOf(res);
    if (scopes.every((s) => principal.scopes.includes(s))) return next();
    const policy = options.toolPolicy;
    // A job tool the policy refuses is an unknown tool to this caller (dispatch answers so).
    if (policy && target.jobTool && !policy.permits(principal, workload, target.jobTool))
      return next();
    const needed = await stepUpScope(
      { pool: options.pool, denials },
      target.taskId,
      target.verb,
      {
        principal,
        correlationId,
        wire: target.wire,
        ...(policy
          ? { admitTool: (tool: string) => policy.permits(principal, workload, tool) }
          : {}),
      },
      scopeOf,
    );
    if (!needed) return next();
    options.onDenied?.('insufficient_scope');
    refuseScope(
      res,
      options.resourceMetadataUrl,
      needed.scope,
      `Your token lacks scope ${needed.scope}, needed for tasks of ${needed.tool}`,
    );
  };
}
