import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  isTaskStatus,
  ToolError,
  type AskAnswer,
  type Json,
  type ToolResult,
  type UpstreamQuestion,
  type UpstreamTaskRef,
  type UpstreamTaskState,
  type UpstreamTaskStatus,
} from '@mtg/tool-kit';
import type { z } from 'zod';
import type { UpstreamConfig } from './upstream-config.ts';

export type UpstreamAuditType =
  'upstream.task_created' | 'upstream.task_cancelled' | 'upstream.task_ended' | 'upstream.call';

/**
 * One upstream task wire (2025-11-25 core tasks, or the 2026-07-28 tasks extension) for one
 * task's run: the client picks the wire when it creates the upstream task, and every later
 * request of that task (this run's or a resumed one's) goes to the same wire.
 */
export interface UpstreamTaskWire {
  create(
    tool: string,
    args: Json,
    options: { idempotencyKey: string; ttlMs?: number },
  ): Promise<UpstreamTaskRef & UpstreamTaskState>;
  get(ref: UpstreamTaskRef): Promise<UpstreamTaskState>;
  result(ref: UpstreamTaskRef): Promise<ToolResult>;
  question(
    ref: UpstreamTaskRef,
    state: UpstreamTaskState,
    o: { answered: readonly string[]; waitMs: number },
  ): Promise<UpstreamQuestion | undefined>;
  answer(ref: UpstreamTaskRef, question: UpstreamQuestion, answer: AskAnswer): Promise<void>;
  /**
   * tasks/cancel after the run stopped: with `token` only (no new exchange, no boundary
   * check), bounded by `within`.
   */
  cancel(
    ref: UpstreamTaskRef,
    token: () => Promise<string>,
    within: { signal: AbortSignal; timeoutMs: number },
  ): Promise<void>;
  /** This run is done with `ref` (its session may go), or, without one, with everything. */
  release(ref: UpstreamTaskRef | undefined): Promise<void>;
}

/** What every wire of one task's client shares: the token, the guard, the audit. */
export interface WireBase {
  upstream: UpstreamConfig;
  signal: AbortSignal;
  token: () => Promise<string>;
  reauthenticate: () => Promise<string>;
  /** The task's boundary check, then the upstream's guard; errors translated for the task. */
  guarded<T>(work: () => Promise<T>): Promise<T>;
  audit: (type: UpstreamAuditType, data: Record<string, unknown>) => Promise<void>;
  /** One request's timeout: the tool's own, else the upstream's. */
  timeoutOf(tool?: string): number;
  fetch?: typeof fetch;
}

/** `upstream.task_ended` for a completed upstream task. */
export const endedAudit = (base: WireBase, ref: UpstreamTaskRef, result: ToolResult) =>
  base.audit('upstream.task_ended', {
    upstream: base.upstream.name,
    upstreamTaskId: ref.taskId,
    status: 'completed',
    isError: result.isError === true,
    ...(ref.wire ? { wire: ref.wire } : {}),
  });

/**
 * An upstream reply checked against the protocol's schema: what does not fit is the
 * upstream's protocol error (the task's tool error), naming what was wrong.
 */
export function checked<S extends z.ZodType>(
  schema: S,
  value: unknown,
  upstream: string,
  what: string,
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new ToolError(
    'upstream_protocol_error',
    `upstream ${upstream} answered ${what} with something that is not one: ${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'invalid'}`.slice(
      0,
      500,
    ),
  );
}

/**
 * The upstream's CallToolResult, checked: content is required here (the SDK's schema
 * defaults it, for servers of older eras), and the result is passed on as the upstream sent
 * it (its content blocks may be of any kind the protocol has, not only text).
 */
export function toolResultOf(value: unknown, upstream: string, what: string): ToolResult {
  if (!Array.isArray((value as { content?: unknown } | null)?.content)) {
    throw new ToolError('upstream_protocol_error', `upstream ${upstream} ${what} without content`);
  }
  checked(CallToolResultSchema, value, upstream, what);
  const { resultType: _type, ...rest } = value as Record<string, unknown>;
  return rest as ToolResult;
}

export function statusOf(value: unknown): UpstreamTaskStatus {
  if (isTaskStatus(value)) return value;
  throw new ToolError(
    'upstream_protocol_error',
    `upstream task status ${JSON.stringify(value)} is not an MCP task status`,
  );
}

export const IDEMPOTENCY_KEY = 'io.mcp-task-gateway/idempotency-key';
