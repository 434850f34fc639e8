import type { TaskStatus } from '@mtg/tool-kit';
import type { FormSchema } from './input-schema.ts';
/** A row of app.tasks as the verbs read it. */
export interface TaskRow {
  id: string;
  issuer: string;
  tenant: string;
  subject: string;
  client: string;
  scopes: string[];
  tool: string;
  arguments: unknown;
  argument_summary: Record<string, unknown>;
  argument_hash: string;
  idempotency_key: string;
  idempotency_kind: 'explicit' | 'derived';
  dedupe_until: Date | null;
  correlation_id: string;
  status: TaskStatus;
  /** How many times the status changed (a trigger counts them: migration 145). */
  status_version: number;
  status_message: string | null;
  progress: { current: number; total: number } | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
  deadline: Date;
  ttl_ms: number;
  poll_interval_ms: number;
  outcome: string | null;
  ended_by: Record<string, unknown> | null;
  cancel_requested_at: Date | null;
  lease_owner: string | null;
  lease_epoch: number;
  job_id: string | null;
  attempts: number;
  needs_live_user: boolean;
  stage_grants: number;
  /** The pg-boss queue of the task's job: one per tool and input schema. */
  job_queue: string;
  /** Pack version and schema fingerprint of the tool as the creating gateway served it. */
  tool_version: string | null;
  tool_fingerprint: string | null;
  registry_fingerprint: string | null;
}

/**
 * Every column of TaskRow, for statements that must not say `*` (prepared statements:
 * packages/db/src/prepared.ts). The check below fails to compile if one is missing.
 */
export const TASK_COLUMNS = [
  'id',
  'issuer',
  'tenant',
  'subject',
  'client',
  'scopes',
  'tool',
  'arguments',
  'argument_summary',
  'argument_hash',
  'idempotency_key',
  'idempotency_kind',
  'dedupe_until',
  'correlation_id',
  'status',
  'status_version',
  'status_message',
  'progress',
  'created_at',
  'updated_at',
  'started_at',
  'ended_at',
  'deadline',
  'ttl_ms',
  'poll_interval_ms',
  'outcome',
  'ended_by',
  'cancel_requested_at',
  'lease_owner',
  'lease_epoch',
  'job_id',
  'attempts',
  'needs_live_user',
  'stage_grants',
  'job_queue',
  'tool_version',
  'tool_fingerprint',
  'registry_fingerprint',
] as const satisfies ReadonlyArray<keyof TaskRow>;
type Unlisted = Exclude<keyof TaskRow, (typeof TASK_COLUMNS)[number]>;
export const everyTaskColumnListed: [Unlisted] extends [never] ? true : Unlisted = true;
/** `SELECT ${TASK_SELECT} FROM app.tasks ...` */
export const TASK_SELECT = TASK_COLUMNS.join(', ');

/**
 * The columns no verb on one task (get, result, cancel, answer) reads: the call's raw
 * arguments (a verb shows their summary), its scopes, idempotency, attempts, lease epoch and
 * placement, which the start and the worker read. A verb's row holds every other column
 * (VERB_COLUMNS): what every wire shows of the task, what the verb decides on and what its
 * audit event names. A poll reads its row at every request, and node-postgres builds the row
 * from its columns at every execution (a parser per column, then each value), so the verbs'
 * row carries 24 columns instead of 38, none of them the arguments.
 */
const NOT_READ_BY_VERBS = [
  'issuer',
  'scopes',
  'arguments',
  'argument_hash',
  'idempotency_key',
  'idempotency_kind',
  'dedupe_until',
  'cancel_requested_at',
  'lease_epoch',
  'attempts',
  'stage_grants',
  'tool_version',
  'tool_fingerprint',
  'registry_fingerprint',
] as const satisfies ReadonlyArray<keyof TaskRow>;
type VerbColumn = Exclude<keyof TaskRow, (typeof NOT_READ_BY_VERBS)[number]>;
export const VERB_COLUMNS = TASK_COLUMNS.filter(
  (c): c is VerbColumn => !(NOT_READ_BY_VERBS as readonly string[]).includes(c),
);
/** A task as a verb on it reads it (VERB_COLUMNS); a whole TaskRow is one too. */
export type VerbTaskRow = Pick<TaskRow, VerbColumn>;
/** `SELECT ${VERB_SELECT} FROM app.tasks ...` */
export const VERB_SELECT = VERB_COLUMNS.join(', ');

// The statuses are @mtg/tool-kit's one list (TASK_STATUSES); the row's column holds one of them.
export type { TaskStatus };
export const isTerminal = (s: TaskStatus) =>
  s === 'completed' || s === 'failed' || s === 'cancelled';

/** What every wire shows of a task. */
export interface TaskView {
  taskId: string;
  tool: string;
  status: TaskStatus;
  statusMessage?: string;
  /**
   * input_required only: who the input is waited for. `owner`: checkpoint mode, the owner
   * resumes it by polling with a fresh token. `downstream`: a system the task follows (an
   * upstream MCP task) waits for input the gateway does not relay; the task goes on by itself
   * once that input arrives there. `caller`: the tool asked its caller a question (`input`)
   * and the task is parked until the owner answers it. `approver`: the tool asked for a
   * second person's approval (`approval`), which only another principal may give.
   */
  inputFrom?: 'owner' | 'downstream' | 'caller' | 'approver';
  /** inputFrom `caller`: the question, with the form its answer must fill. */
  input?: { key: string; message: string; requestedSchema: FormSchema };
  /** inputFrom `approver`: the scope an approver must hold and the reason asked with. */
  approval?: { key: string; scope: string; reason: string };
  progress?: { current: number; total: number };
  createdAt: string;
  lastUpdatedAt: string;
  deadline: string;
  ttlMs: number;
  pollIntervalMs: number;
  outcome?: string;
  endedBy?: Record<string, unknown>;
  arguments: Record<string, unknown>;
}

export function toView(row: VerbTaskRow): TaskView {
  return {
    taskId: row.id,
    tool: row.tool,
    status: row.status,
    ...(row.status_message ? { statusMessage: row.status_message } : {}),
    ...(row.status === 'input_required'
      ? {
          inputFrom: row.needs_live_user
            ? ('owner' as const)
            : // Parked with no lease: a question waits (a mirrored downstream keeps its lease).
              row.lease_owner === null
              ? ('caller' as const)
              : ('downstream' as const),
        }
      : {}),
    ...(row.progress ? { progress: row.progress } : {}),
    createdAt: row.created_at.toISOString(),
    lastUpdatedAt: row.updated_at.toISOString(),
    deadline: row.deadline.toISOString(),
    ttlMs: row.ttl_ms,
    pollIntervalMs: row.poll_interval_ms,
    ...(row.outcome ? { outcome: row.outcome } : {}),
    ...(row.ended_by ? { endedBy: row.ended_by } : {}),
    arguments: row.argument_summary,
  };
}
