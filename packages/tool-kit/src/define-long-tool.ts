import type { z } from 'zod';
import type { Json, LongTool, LongToolLimits, TaskContext } from './tool-types.ts';
import { assertScope, assertToolName } from './tool-names.ts';

const MINUTE = 60_000;

/** Limits a long tool gets where its definition and TOOL_LIMITS say nothing. */
export const DEFAULT_LIMITS: LongToolLimits = Object.freeze({
  defaultDeadlineMs: 30 * MINUTE,
  maxDeadlineMs: 2 * 60 * MINUTE,
  retentionMs: 24 * 60 * MINUTE,
  deleteResultOnRead: false,
  maxResultBytes: 256 * 1024,
});

export interface LongToolSpec<S extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: S;
  output?: z.ZodType;
  /** OAuth scope a caller must hold; also the scope of the task's delegated credentials. */
  scope: string;
  /**
   * The scopes `ctx.approval` may ask an approver to hold: declared, so the authorization
   * server knows to issue them and a typo fails at load, not at the first approval.
   */
  approvalScopes?: readonly string[];
  limits?: Partial<LongToolLimits>;
  /**
   * A redacted view of the arguments for the audit trail and listings: no secrets. The
   * gateway bounds its size (keys, key length, bytes) whatever this returns.
   */
  summarize(args: z.infer<S>): Record<string, unknown>;
  execute(ctx: TaskContext, args: z.infer<S>): Promise<Json>;
}

/** A long tool: a durable task run by a worker in journaled steps. */
export function defineLongTool<S extends z.ZodType>(spec: LongToolSpec<S>): LongTool<z.infer<S>> {
  assertToolName(spec.name);
  assertScope(spec.scope, spec.name);
  for (const s of spec.approvalScopes ?? []) assertScope(s, spec.name);
  const limits = { ...DEFAULT_LIMITS, ...spec.limits };
  if (limits.defaultDeadlineMs > limits.maxDeadlineMs) {
    throw new TypeError(`tool ${spec.name}: defaultDeadlineMs exceeds maxDeadlineMs`);
  }
  return Object.freeze({
    kind: 'long' as const,
    name: spec.name,
    title: spec.title,
    description: spec.description,
    inputSchema: spec.input as z.ZodType<z.infer<S>>,
    ...(spec.output ? { outputSchema: spec.output } : {}),
    scope: spec.scope,
    ...(spec.approvalScopes?.length ? { approvalScopes: [...spec.approvalScopes] } : {}),
    limits,
    summarize: spec.summarize.bind(spec),
    execute: spec.execute.bind(spec),
  });
}
