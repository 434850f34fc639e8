import type { z } from 'zod';

/** The owner a task runs for, copied from the task row (never from arguments). */
export interface TaskOwner {
  tenant: string;
  subject: string;
  client: string;
}

/** A call to a downstream system, authorized for this task; writes carry idempotency keys. */
export interface DownstreamClient {
  write(
    path: string,
    body: Record<string, unknown>,
    options: { idempotencyKey: string; signal: AbortSignal },
  ): Promise<Record<string, unknown>>;
  read(path: string, options: { signal: AbortSignal }): Promise<Record<string, unknown>>;
}

/**
 * What a long tool's code sees while a worker runs it. `step` is the durable unit: a step
 * that completed before (in this or an earlier attempt) returns its journaled output
 * without running again; before each step the runner checks cancellation, deadline, lease
 * and principal, and throws to stop the run when any of them says so.
 */
export interface TaskContext {
  taskId: string;
  owner: TaskOwner;
  /** Aborted when the task is cancelled, revoked, past its deadline or the lease is lost. */
  signal: AbortSignal;
  step<T extends Record<string, unknown> | unknown[] | string | number | boolean | null>(
    name: string,
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T>;
  progress(current: number, total: number, message?: string): Promise<void>;
  downstream: DownstreamClient;
  /** Per-step duration of the demo tools (DEMO_STEP_MS). */
  stepMs: number;
  /** Waits `ms`, rejecting at once when the task is stopped. */
  sleep(ms: number): Promise<void>;
}

export interface LongToolLimits {
  /** Deadline when the caller asks for none. */
  defaultDeadlineMs: number;
  /** A requested deadline is capped to this. */
  maxDeadlineMs: number;
  /** How long the task and its result are kept after the task ends. */
  retentionMs: number;
  /** Delete the stored result after its first successful read. */
  deleteResultOnRead: boolean;
  /** Results larger than this fail the task with a clear error. */
  maxResultBytes: number;
  /**
   * Checkpoint mode: each stage needs a live user. The task pauses (input_required) before
   * every stage after the first and resumes when its owner polls with a fresh token.
   */
  requireLiveUserEachStage?: boolean;
}

/** A tool that runs as a durable task on a worker. */
export interface LongToolDefinition<I = any> {
  kind: 'long';
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodType<I>;
  outputSchema?: z.ZodType;
  scope: string;
  limits: LongToolLimits;
  /** A redacted view of the arguments for audit and listings (no secrets, bounded size). */
  summarize(args: I): Record<string, unknown>;
  /** Runs on a worker. Returns the structured result; the runner wraps it as a CallToolResult. */
  execute(context: TaskContext, args: I): Promise<Record<string, unknown>>;
}
