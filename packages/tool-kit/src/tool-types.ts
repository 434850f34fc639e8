import type { z } from 'zod';
import type { TaskStatus } from './task-status.ts';

/**
 * Glossary
 * - tool: one MCP tool. *Instant* tools answer within the request (`defineTool`); *long* tools
 *   run as durable tasks on a worker (`defineLongTool`).
 * - pack: a module that exports tools, the zod schema of its own environment variables and the
 *   names of the targets it calls (`definePack`). Loaded by `TOOL_PACKS`.
 * - target: a downstream system a long tool calls (base URL, token audience, scopes, timeouts),
 *   declared by configuration and named by the pack. `ctx.target(name)` hands out its client.
 * - step: the durable unit of a long tool. A finished step's output is journaled; after a
 *   crash the task resumes at the first unfinished step and finished ones never run again.
 */

/** The owner a task runs for, copied from the task row (never from arguments). */
export interface TaskOwner {
  tenant: string;
  subject: string;
  client: string;
}

/** Who calls an instant tool, as the gateway verified it from the access token. */
export interface ToolCaller extends TaskOwner {
  issuer: string;
  scopes: string[];
}

/** Structured logging handed to tool code; entries carry the task or call they belong to. */
export interface ToolLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export type Json = Record<string, unknown>;

/**
 * An HTTP client for one target, for one task. Every call passes the task's boundary check
 * (cancel, deadline, lease, revocation), the target's resilience policy (timeout, retries
 * with backoff, circuit breaker) and carries a short-lived token for the target's audience
 * (`sub` = the task's owner, `act` = the worker). Writes require an idempotency key, so a
 * retried or resumed write lands once. Paths are relative to the target's base URL; `.` and
 * `..` segments are refused.
 */
export interface TargetClient {
  readonly name: string;
  get(path: string, options?: { signal?: AbortSignal }): Promise<Json>;
  post(path: string, body: Json, options: WriteOptions): Promise<Json>;
  put(path: string, body: Json, options: WriteOptions): Promise<Json>;
  patch(path: string, body: Json, options: WriteOptions): Promise<Json>;
  delete(path: string, options: WriteOptions): Promise<Json>;
}

/**
 * Where an upstream task lives: its id, the MCP session it is bound to, and the task wire it
 * was created on (`2026-07-28`: the tasks extension, stateless, no session; `2025-11-25`:
 * core tasks, the default of a journal that does not say).
 */
export interface UpstreamTaskRef {
  taskId: string;
  sessionId: string | null;
  protocolVersion: string | null;
  wire?: UpstreamTaskWire;
}

export type UpstreamTaskWire = '2025-11-25' | '2026-07-28';

/** The upstream's CallToolResult, when its task wire carries it inline (2026-07-28). */
export interface UpstreamTaskState {
  status: UpstreamTaskStatus;
  statusMessage?: string;
  pollIntervalMs?: number;
  result?: ToolResult;
  /** 2026-07-28: the form-mode elicitations an input_required task carries, by key. */
  inputRequests?: Record<string, { message: string; requestedSchema: Record<string, unknown> }>;
}

/**
 * What an input_required upstream task asks (a form-mode elicitation), and how to answer it
 * on its wire: the 2026-07-28 `inputRequests` key, or the JSON-RPC id of the 2025-11-25
 * `elicitation/create` it sent on tasks/result. JSON, so it is journaled as it is.
 */
export interface UpstreamQuestion {
  key: string;
  requestId?: string | number;
  message: string;
  requestedSchema: Record<string, unknown>;
}

/** An upstream MCP server's task status: the gateway's own statuses (task-status.ts). */
export type UpstreamTaskStatus = TaskStatus;

/**
 * An upstream MCP server for one task, handed in by the worker: every request carries a
 * token exchanged for the upstream's audience (`sub` = the owner, `act` = the worker; never
 * the caller's token), passes the task's boundary check and the upstream's protection
 * (concurrency cap, circuit breaker, timeouts), and is audited.
 */
export interface UpstreamTaskClient {
  readonly name: string;
  /**
   * tools/call as a task on the task wire the upstream offers (the 2026-07-28 extension when
   * it does, else 2025-11-25 core tasks): the upstream's task, in a session this client opens
   * (none on 2026-07-28).
   */
  createTask(
    tool: string,
    args: Json,
    options: { idempotencyKey: string; ttlMs?: number },
  ): Promise<UpstreamTaskRef & UpstreamTaskState>;
  /** tasks/get; on the 2026-07-28 wire a completed task carries its result. */
  getTask(ref: UpstreamTaskRef): Promise<UpstreamTaskState>;
  /** The CallToolResult of a completed task (tasks/result, or tasks/get on 2026-07-28). */
  taskResult(ref: UpstreamTaskRef): Promise<ToolResult>;
  /**
   * The question an input_required upstream task asks, if any: on 2026-07-28 the first of
   * `state.inputRequests` whose key is not in `answered`; on 2025-11-25 the elicitation the
   * upstream sends on tasks/result within `waitMs` (none when it sends none).
   */
  question(
    ref: UpstreamTaskRef,
    state: UpstreamTaskState,
    o: { answered: readonly string[]; waitMs: number },
  ): Promise<UpstreamQuestion | undefined>;
  /** Sends the caller's answer to the upstream on the task's wire (tasks/update, or the response). */
  answer(ref: UpstreamTaskRef, question: UpstreamQuestion, answer: AskAnswer): Promise<void>;
  /**
   * After our task was stopped: tasks/cancel when the stop ends it (cancel, revocation,
   * deadline), bounded, answering whether the upstream acknowledged; after a shutdown or a
   * lost lease nothing is sent (the worker that resumes polls the same upstream task).
   */
  cancelTask(ref: UpstreamTaskRef): Promise<boolean>;
  /** A plain tools/call with a progress token and the idempotency key in `_meta`. */
  callTool(
    tool: string,
    args: Json,
    options: {
      idempotencyKey: string;
      onProgress?: (current: number, total: number | undefined, message?: string) => void;
    },
  ): Promise<ToolResult>;
  /**
   * The upstream task is over: its session may go (DELETE). Without a ref: this run's
   * sessions are closed here only, the upstream keeps them (a later run resumes them).
   */
  release(ref: UpstreamTaskRef | undefined): Promise<void>;
}

export interface WriteOptions {
  idempotencyKey: string;
  signal?: AbortSignal;
}

export type StepOutput = Record<string, unknown> | unknown[] | string | number | boolean | null;

/**
 * What a long tool's code sees while a worker runs it: capabilities handed in by the host,
 * never built by the tool. Before each step the runner checks cancellation, deadline, lease
 * and principal, and throws to stop the run when any of them says so.
 */
export interface TaskContext {
  taskId: string;
  owner: TaskOwner;
  /** Aborted when the task is cancelled, revoked, past its deadline or the lease is lost. */
  signal: AbortSignal;
  /** Runs `fn` once per task: a step finished before returns its journaled output. */
  step<T extends StepOutput>(name: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T>;
  progress(current: number, total: number, message?: string): Promise<void>;
  /**
   * A downstream the tool follows waits for input (an upstream task in input_required): the
   * task shows input_required with `message` until this is called with null (working
   * again). The run keeps its lease and goes on (polling): cancel, deadline and revocation
   * stop it as usual. Each change of status is audited; a repeat refreshes the message.
   */
  inputRequired?(message: string | null, downstream: string): Promise<void>;
  /**
   * Asks the task's caller a question (MCP form-mode elicitation: a flat schema of string,
   * number, integer and boolean fields) and returns the answer. The task shows
   * `input_required` on every wire and is parked meanwhile: no worker slot or lease is held
   * while a person thinks, and the run resumes (from its journal) once the owner answered; the
   * deadline still applies. The answer is journaled like a step: asked again after a crash,
   * the same question returns the recorded answer without asking. Free-text answers are kept
   * out of the audit trail unless `keepAnswerInAudit` is set.
   */
  ask(question: AskQuestion): Promise<AskAnswer>;
  /**
   * Four-eyes approval: the task waits, parked as for `ask`, until a different principal of
   * the same tenant holding `scope` approves or rejects it (the requester never can, through
   * no client). Approvers see the tool, the owner, the argument summary, `reason` and
   * `summary`. Resolves once approved; a rejection ends the task with the approver's reason
   * (the run does not go on). Journaled like a step: a resumed run does not ask again.
   */
  approval(request: ApprovalRequest): Promise<ApprovalGranted>;
  /** Waits `ms`, rejecting at once when the task is stopped. */
  sleep(ms: number): Promise<void>;
  /** The client of a target the pack declared; a name it did not declare is a TypeError. */
  target(name: string): TargetClient;
  /**
   * An upstream MCP server (UPSTREAMS_FILE) the pack declared (`definePack({ upstreams })`); a
   * name it did not declare is a TypeError. Its token carries the scope the upstream's
   * configuration requires, and only when the task's delegation holds it: otherwise the call
   * is refused with the ToolError `upstream_scope_missing` (docs/tools.md, "Upstreams").
   */
  upstream?(name: string): UpstreamTaskClient;
  logger: ToolLogger;
}

/** A question for `ctx.ask`: the message shown and the form the answer fills. */
export interface AskQuestion {
  message: string;
  schema: {
    type: 'object';
    properties: Record<
      string,
      Record<string, unknown> & { type: 'string' | 'number' | 'integer' | 'boolean' }
    >;
    required?: string[];
  };
  /** The answer's free text may be written to the audit trail (default: only its length). */
  keepAnswerInAudit?: boolean;
}

/** What `ctx.approval` asks for: the approver's scope, why, and what is to be approved. */
export interface ApprovalRequest {
  scope: string;
  reason: string;
  /** A small, redacted view of what is to be approved (shown to approvers, audited). */
  summary: Record<string, unknown>;
}

export interface ApprovalGranted {
  approved: true;
  approver: { subject: string; client: string };
}

/** The caller's answer (the protocol's ElicitResult). */
export type AskAnswer =
  | { action: 'accept'; content: Record<string, string | number | boolean> }
  | { action: 'decline' }
  | { action: 'cancel' };

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

/** What a tool returns on the wire: an MCP CallToolResult. */
export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** What the gateway hands an instant tool. */
export interface InstantToolContext {
  caller: ToolCaller;
  correlationId: string;
  logger: ToolLogger;
  signal: AbortSignal;
}

/** Where a tool came from, filled in by definePack. */
export interface ToolOrigin {
  pack: string;
  version: string;
  /** Targets the pack declared: the only names `ctx.target()` accepts. */
  targets: readonly string[];
  /** Upstreams the pack declared: the only names `ctx.upstream()` accepts (absent: none). */
  upstreams?: readonly string[];
}

/** An instant tool, as the registry and the gateway see it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a tool list mixes input types; each tool's schema checks its own
export interface InstantTool<I = any> {
  kind: 'instant';
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodType<I>;
  outputSchema?: z.ZodType;
  scope?: string;
  origin?: ToolOrigin;
  run(context: InstantToolContext, args: I): Promise<Json>;
}

/** A long tool, as the registry, the gateway and the runner see it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a tool list mixes input types; each tool's schema checks its own
export interface LongTool<I = any> {
  kind: 'long';
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodType<I>;
  outputSchema?: z.ZodType;
  scope: string;
  /** The scopes `ctx.approval` may name (see LongToolSpec). */
  approvalScopes?: readonly string[];
  limits: LongToolLimits;
  origin?: ToolOrigin;
  /** A redacted view of the arguments for audit and listings (no secrets, bounded size). */
  summarize(args: I): Record<string, unknown>;
  /** Runs on a worker. Returns the structured result; the runner wraps it as a CallToolResult. */
  execute(context: TaskContext, args: I): Promise<Json>;
  /**
   * `execute` returns a whole CallToolResult (`content`, and `structuredContent` and
   * `isError` if any), stored as the task's result as it is: a tool that fronts another MCP
   * server's tool (an upstream's) hands on what that tool returned.
   */
  returnsToolResult?: boolean;
}

export type AnyTool = InstantTool | LongTool;
