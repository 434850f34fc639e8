import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import {
  appendAuditGrouped,
  appendAuditInTransaction,
  auditAppendArgs,
  auditAppendTemplate,
  filledBySql,
} from '@mtg/audit';
import { prepared, runPrepared, withTransaction } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import type { LongToolDefinition } from '@mtg/tools';
import { argumentHash, derivedKey } from '../argument-hash.ts';
import { boundSummary } from '../bound-summary.ts';
import {
  obtainDelegation,
  sealDelegation,
  type Delegation,
  type DelegationDeps,
} from '../delegate-task.ts';
import { CHANNELS } from '../channels.ts';
import type { DenialFold } from '../fold-denials.ts';
import type { WorkerDirectory } from '../worker-directory.ts';
import { taskError, type TaskError, type TaskOutcome } from '../errors.ts';
import type { JobQueue } from '../job-queue.ts';
import { revocationFromRow, type PrincipalRevocationRow } from '../revoke-principal.ts';
import { newTaskId } from '../task-id.ts';
import { TASK_COLUMNS, TASK_SELECT, type TaskRow } from '../task-row.ts';
import { RETAINED } from './predicates.ts';
import { startStatement } from './start-statement.ts';

export interface StartLimits {
  maxActivePerUser: number;
  maxActivePerTenant: number;
  /** How long a derived key keeps deduplicating after its task ended. */
  derivedDedupeWindowMs: number;
  pollIntervalMs: number;
}

export interface StartInput {
  principal: Principal;
  tool: LongToolDefinition;
  /** Arguments already validated against the tool's schema. */
  args: unknown;
  idempotencyKey?: string;
  deadlineMs?: number;
  ttlMs?: number;
  correlationId: string;
  wire: string;
  /** The caller's token, exchanged for the task-bound delegation; never stored. */
  subjectToken?: string;
}

export type StartOutcome = TaskOutcome<{ task: TaskRow; created: boolean }>;

const LIVE_REPEAT = prepared(
  `SELECT ${TASK_SELECT} FROM app.tasks
    WHERE tenant = $1 AND subject = $2 AND client = $3 AND dedupe_key = $4
      AND (dedupe_until IS NULL OR dedupe_until > now()) AND argument_hash = $5
      AND ${RETAINED}`,
);
const REVOKED_MESSAGE = 'Access for this principal has been revoked';
/**
 * The admission checks (migration 200, in the start's statement: start-statement.ts): the
 * tenant's cap lock (`hashtext('mtg-cap:' || tenant)`), then the active tasks (ACTIVE) of the
 * tenant and of the subject, counted after it; then the principal's lock, shared
 * (revoke-principal.ts: a revocation takes it exclusively), then the principal's revocation,
 * read after it. Holding the cap lock to commit, concurrent starts in one tenant count each
 * other and cannot overshoot; holding the principal's, a revocation either committed before
 * this check and is seen by it, or starts after the start commits and so finds and stops
 * what it made. Lock order, acyclic: a start takes the cap lock, then the principal's, then
 * the audit chain; a revocation the principal's, then the audit chain.
 */
type StartRow = PrincipalRevocationRow & { user_active: number; tenant_active: number } & {
  [column in keyof TaskRow]: TaskRow[column] | null;
};

/** Where a tool's tasks go: its queue, and the version the creating gateway serves. */
export interface ToolPlacement {
  queue: string;
  version: string;
  fingerprint: string;
  registryFingerprint: string;
}

/**
 * Starts a task, or returns the one an equal start already made. Check-and-create is one
 * INSERT against a unique index, so concurrent identical starts converge on one row; the
 * admission checks, the job, the delegation and the `task.created` event commit with it, in
 * one statement (start-statement.ts), or not at all.
 */
export async function createTask(
  deps: {
    pool: Pool;
    queue: JobQueue;
    limits: StartLimits;
    delegation?: DelegationDeps;
    placement(tool: string): ToolPlacement;
    denials: DenialFold;
    /** Reads go to a replica: every ending must notify this gateway, so each is watched. */
    reads?: unknown;
    /** The live workers: the created notification goes to the chosen one's own channel. */
    workers?: Pick<WorkerDirectory, 'wakeChannel'>;
  },
  input: StartInput,
): Promise<StartOutcome> {
  const { principal: p, tool } = input;
  const placement = deps.placement(tool.name);
  const owner = { tenant: p.tenant, subject: p.subject, client: p.client };
  const hash = argumentHash(tool.name, input.args);
  const explicit = input.idempotencyKey !== undefined;
  const key = explicit ? `explicit:${input.idempotencyKey}` : `derived:${derivedKey(owner, hash)}`;
  const deadlineMs = Math.min(
    input.deadlineMs ?? tool.limits.defaultDeadlineMs,
    tool.limits.maxDeadlineMs,
  );
  const ttlMs = Math.min(input.ttlMs ?? tool.limits.retentionMs, tool.limits.retentionMs);
  const audit = {
    tenant: p.tenant,
    subject: p.subject,
    client: p.client,
    tool: tool.name,
    correlationId: input.correlationId,
  };

  // A repeat of a live start is answered with the task it made. No lookup comes first: the
  // start statement's INSERT finds the idempotency slot taken (reuseExisting), so a start that
  // is not a repeat, nearly all of them, makes one round trip fewer, and a repeat pays a token
  // exchange it then drops. Where the exchange or the active-task caps refuse, a live repeat
  // is still answered with its task, as before any exchange.
  const liveRepeat = async (): Promise<StartOutcome | undefined> => {
    const live = await runPrepared<TaskRow>(deps.pool, LIVE_REPEAT, [
      p.tenant,
      p.subject,
      p.client,
      key,
      hash,
    ]);
    const task = live.rows[0];
    if (!task) return undefined;
    await appendAuditGrouped(deps.pool, {
      type: 'task.deduplicated',
      taskId: task.id,
      ...audit,
      data: { wire: input.wire, idempotency: task.idempotency_kind },
    });
    return { ok: true, task, created: false };
  };

  let delegation: Delegation | undefined;
  if (deps.delegation) {
    if (!input.subjectToken)
      throw new Error('createTask: delegation is configured but no subject token was given');
    const d = await obtainDelegation(deps.delegation, input.subjectToken, tool.scope, deadlineMs);
    if (!d.ok) {
      const repeat = await liveRepeat();
      if (repeat) return repeat;
      await deps.denials.deny({
        type: 'task.denied',
        ...audit,
        reason: d.code,
        data: { verb: 'start', wire: input.wire, detail: d.message },
      });
      return d;
    }
    delegation = d.delegation;
  }

  for (let attempt = 0; attempt < 5; attempt++) {
    const id = newTaskId();
    const jobId = randomUUID();
    const summary = boundSummary(tool.summarize(input.args));
    const job = await deps.queue.jobInsert({
      queue: placement.queue,
      taskId: id,
      jobId,
      expireInSeconds: Math.ceil(deadlineMs / 1000) + 60,
    });
    // Its deadline is the row's (the database's clock): the statement fills it in.
    const [createdType, createdParts, createdNames] = auditAppendTemplate({
      type: 'task.created',
      taskId: id,
      ...audit,
      data: {
        wire: input.wire,
        arguments: summary,
        argumentHash: hash,
        idempotency: explicit ? 'explicit' : 'derived',
        deadline: filledBySql('deadline'),
        ttlMs,
        scopes: p.scopes,
        jobId,
      },
    });
    const after = delegation
      ? [
          auditAppendArgs({
            type: 'task.delegated',
            taskId: id,
            ...audit,
            data: {
              from: { subject: p.subject, client: p.client, audience: 'gateway' },
              to: {
                subject: p.subject,
                act: delegation.act,
                audience: deps.delegation!.workerResource,
              },
              scope: delegation.scope,
              expiresAt: new Date(delegation.expiresAt).toISOString(),
              keyId: deps.delegation!.cipher.currentKeyId,
            },
          }),
        ]
      : [];
    const sealed = delegation ? sealDelegation(deps.delegation!.cipher, id, delegation) : [];
    const wake = deps.workers
      ? await deps.workers.wakeChannel(placement.queue, id)
      : CHANNELS.created;
    const r = await runPrepared<StartRow>(
      deps.pool,
      startStatement(job.text, !!delegation, !!deps.reads),
      [
        id,
        p.issuer,
        p.tenant,
        p.subject,
        p.client,
        p.scopes,
        tool.name,
        JSON.stringify(input.args),
        JSON.stringify(summary),
        hash,
        key,
        explicit ? 'explicit' : 'derived',
        explicit ? null : deps.limits.derivedDedupeWindowMs,
        input.correlationId,
        deadlineMs,
        ttlMs,
        deps.limits.pollIntervalMs,
        jobId,
        tool.limits.requireLiveUserEachStage === true,
        placement.queue,
        placement.version,
        placement.fingerprint,
        placement.registryFingerprint,
        deps.limits.maxActivePerUser,
        deps.limits.maxActivePerTenant,
        p.issuedAt ?? null,
        job.value,
        // The chosen worker's own channel (worker-directory.ts); on the shared one, the queue
        // in the payload lets a worker that does not serve it stay asleep.
        wake,
        JSON.stringify({ taskId: id, queue: placement.queue }),
        [createdType, ...after.map(([type]) => type)],
        createdParts,
        createdNames,
        after.map(([, body]) => body),
        ...sealed,
      ],
    );
    const row = r.rows[0]!;
    if (row.id !== null) return { ok: true, task: taskRowOf(row), created: true };
    // Not inserted: refused (the counts did not count it), or its idempotency slot is taken.
    const capped = overCaps(
      { user_active: row.user_active + 1, tenant_active: row.tenant_active + 1 },
      deps.limits,
    );
    // At the cap, a live repeat is answered with its task: it asks for nothing new.
    const repeat = capped && (await liveRepeat());
    if (repeat) return repeat;
    const refused =
      capped ??
      (revocationFromRow(row, p) ? taskError('principal_revoked', REVOKED_MESSAGE) : undefined);
    const outcome = refused ?? (await reuseExisting(deps.pool, owner, key, hash, input, audit));
    if (outcome === 'retry') continue;
    if (!outcome.ok) {
      await deps.denials.deny({
        type: 'task.denied',
        ...audit,
        reason: outcome.code,
        data: { verb: 'start', wire: input.wire },
      });
    }
    return outcome;
  }
  throw new Error('createTask: idempotency slot kept changing under concurrent starts');
}

/**
 * A start whose idempotency slot an earlier task holds: that task, if the slot still
 * deduplicates and the arguments are the same; a refusal if they differ; 'retry' once the
 * slot is freed (the earlier task's window passed) or was released meanwhile.
 */
async function reuseExisting(
  pool: Pool,
  owner: { tenant: string; subject: string; client: string },
  key: string,
  hash: string,
  input: StartInput,
  audit: Record<string, string>,
): Promise<StartOutcome | 'retry'> {
  return withTransaction(pool, async (client) => {
    const found = await client.query<TaskRow & { window_passed: boolean }>(
      // A task past its retention is gone for every verb, so it deduplicates nothing either.
      `SELECT ${TASK_SELECT},
              (dedupe_until IS NOT NULL AND dedupe_until <= now()) OR NOT ${RETAINED}
              AS window_passed
         FROM app.tasks WHERE tenant = $1 AND subject = $2 AND client = $3 AND dedupe_key = $4`,
      [owner.tenant, owner.subject, owner.client, key],
    );
    const existing = found.rows[0];
    if (!existing) return 'retry'; // released between our INSERT and SELECT
    if (existing.window_passed) {
      // The earlier task ended long enough ago: free the key so this start creates a new task.
      await client.query(
        `UPDATE app.tasks SET dedupe_key = NULL
          WHERE id = $1 AND (dedupe_until <= now() OR NOT ${RETAINED})`,
        [existing.id],
      );
      return 'retry';
    }
    if (existing.argument_hash !== hash) {
      return taskError(
        'idempotency_conflict',
        `Idempotency key "${input.idempotencyKey}" was already used for a different call ` +
          `(task ${existing.id}); use a new key for different arguments`,
      );
    }
    await appendAuditInTransaction(client, {
      type: 'task.deduplicated',
      taskId: existing.id,
      ...audit,
      data: { wire: input.wire, idempotency: existing.idempotency_kind },
    });
    const { window_passed: _passed, ...task } = existing;
    return { ok: true, task, created: false };
  });
}

/** The task of a start statement's row (which carries the admission's figures beside it). */
function taskRowOf(row: StartRow): TaskRow {
  const task: Record<string, unknown> = {};
  for (const c of TASK_COLUMNS) task[c] = row[c];
  return task as unknown as TaskRow;
}

/**
 * Active-task caps, from counts that include the refused start (the admission counted the
 * tenant's and the subject's active tasks under the tenant's lock, before inserting it).
 */
function overCaps(
  counts: { user_active: number; tenant_active: number },
  limits: StartLimits,
): TaskError | undefined {
  const { user_active, tenant_active } = counts;
  if (user_active > limits.maxActivePerUser) {
    return taskError(
      'user_limit',
      `Too many active tasks for this user (limit ${limits.maxActivePerUser}); ` +
        `retry after one of them finishes`,
      { retryAfterSeconds: 5 },
    );
  }
  if (tenant_active > limits.maxActivePerTenant) {
    return taskError(
      'tenant_limit',
      `Too many active tasks in this tenant (limit ${limits.maxActivePerTenant}); ` +
        `retry after one of them finishes`,
      { retryAfterSeconds: 5 },
    );
  }
  return undefined;
}
