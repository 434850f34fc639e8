import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import {
  appendAuditEventsInTransaction,
  appendAuditGrouped,
  appendAuditInTransaction,
} from '@mtg/audit';
import { prepared, runPrepared } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import type { LongToolDefinition } from '@mtg/tools';
import { argumentHash, derivedKey } from '../argument-hash.ts';
import { boundSummary } from '../bound-summary.ts';
import {
  obtainDelegation,
  storeDelegation,
  type Delegation,
  type DelegationDeps,
} from '../delegate-task.ts';
import { CHANNELS } from '../channels.ts';
import type { DenialFold } from '../fold-denials.ts';
import { taskError, type TaskOutcome } from '../errors.ts';
import type { JobQueue } from '../job-queue.ts';
import { revocationFromRow, type PrincipalRevocationRow } from '../revoke-principal.ts';
import { newTaskId } from '../task-id.ts';
import { TASK_SELECT, type TaskRow } from '../task-row.ts';
import { RETAINED } from './predicates.ts';

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

class Refused extends Error {
  outcome: Extract<StartOutcome, { ok: false }>;
  constructor(outcome: Extract<StartOutcome, { ok: false }>) {
    super(outcome.message);
    this.outcome = outcome;
  }
}

const INSERT = prepared(`
INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
  argument_summary, argument_hash, idempotency_key, idempotency_kind, dedupe_key,
  dedupe_window_ms, correlation_id, status_message, deadline, ttl_ms, poll_interval_ms, job_id,
  needs_live_user, stage_grants, job_queue, tool_version, tool_fingerprint, registry_fingerprint)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $11, $13, $14, 'queued',
  now() + $15 * interval '1 millisecond', $16, $17, $18, $19, 1, $20, $21, $22, $23)
ON CONFLICT (tenant, subject, client, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING ${TASK_SELECT}`);
const LIVE_REPEAT = prepared(
  `SELECT ${TASK_SELECT} FROM app.tasks
    WHERE tenant = $1 AND subject = $2 AND client = $3 AND dedupe_key = $4
      AND (dedupe_until IS NULL OR dedupe_until > now()) AND argument_hash = $5
      AND ${RETAINED}`,
);
const NOTIFY = prepared('SELECT pg_notify($1, $2)');
const REVOKED_MESSAGE = 'Access for this principal has been revoked';
/**
 * The admission checks, in one round trip (migration 200): the tenant's cap lock
 * (`hashtext('mtg-cap:' || tenant)`), then the active tasks (ACTIVE) of the tenant and of the
 * subject, counted after it; then the principal's lock, shared (revoke-principal.ts: a
 * revocation takes it exclusively), then the principal's revocation, read after it. Holding
 * the cap lock to commit, concurrent starts in one tenant count each other and cannot
 * overshoot; holding the principal's, a revocation either committed before this check and is
 * seen by it, or starts after this transaction commits and so finds and stops what it made.
 * Lock order, acyclic: a start takes the cap lock, then the principal's, then the audit chain;
 * a revocation the principal's, then the audit chain.
 */
const ADMISSION = prepared(
  'SELECT user_active, tenant_active, revoked, revoked_second FROM app.start_admission($1, $2)',
);
type AdmissionRow = PrincipalRevocationRow & { user_active: number; tenant_active: number };

/**
 * Starts a task, or returns the one an equal start already made. Check-and-create is one
 * INSERT against a unique index, so concurrent identical starts converge on one row; the
 * job and the `task.created` event commit with it or not at all.
 */
/** Where a tool's tasks go: its queue, and the version the creating gateway serves. */
export interface ToolPlacement {
  queue: string;
  version: string;
  fingerprint: string;
  registryFingerprint: string;
}

export async function createTask(
  deps: {
    pool: Pool;
    queue: JobQueue;
    limits: StartLimits;
    delegation?: DelegationDeps;
    placement(tool: string): ToolPlacement;
    denials: DenialFold;
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

  // A repeat of a live start returns the existing task without another token exchange.
  const live = await runPrepared<TaskRow>(deps.pool, LIVE_REPEAT, [
    p.tenant,
    p.subject,
    p.client,
    key,
    hash,
  ]);
  if (live.rows[0]) {
    await appendAuditGrouped(deps.pool, {
      type: 'task.deduplicated',
      taskId: live.rows[0].id,
      ...audit,
      data: { wire: input.wire, idempotency: live.rows[0].idempotency_kind },
    });
    return { ok: true, task: live.rows[0], created: false };
  }

  let delegation: Delegation | undefined;
  if (deps.delegation) {
    if (!input.subjectToken)
      throw new Error('createTask: delegation is configured but no subject token was given');
    const d = await obtainDelegation(deps.delegation, input.subjectToken, tool.scope, deadlineMs);
    if (!d.ok) {
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
    const client = await deps.pool.connect();
    try {
      await client.query('BEGIN');
      const id = newTaskId();
      const jobId = randomUUID();
      const inserted = await runPrepared<TaskRow>(client, INSERT, [
        id,
        p.issuer,
        p.tenant,
        p.subject,
        p.client,
        p.scopes,
        tool.name,
        JSON.stringify(input.args),
        JSON.stringify(boundSummary(tool.summarize(input.args))),
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
      ]);
      if (inserted.rowCount === 0) {
        const existing = await reuseExisting(client, owner, key, hash, input, audit);
        if (existing === 'retry') {
          await client.query('ROLLBACK');
          continue;
        }
        await client.query('COMMIT');
        return existing;
      }
      const task = inserted.rows[0]!;
      const admission = await runPrepared<AdmissionRow>(client, ADMISSION, [p.tenant, p.subject]);
      refuseOverCaps(admission.rows[0]!, deps.limits);
      // The HTTP layer checked revocation before the token exchange; a revocation may have
      // committed since. Checked again under the principal's lock (ADMISSION).
      if (revocationFromRow(admission.rows[0], p)) {
        throw new Refused(taskError('principal_revoked', REVOKED_MESSAGE));
      }
      await deps.queue.enqueue(client, {
        queue: placement.queue,
        taskId: task.id,
        jobId,
        expireInSeconds: Math.ceil(deadlineMs / 1000) + 60,
      });
      // The queue in the payload lets a worker that does not serve it stay asleep.
      const created: [string, string] = [
        CHANNELS.created,
        JSON.stringify({ taskId: id, queue: placement.queue }),
      ];
      // With a delegation, its store and the notification are one statement.
      if (delegation)
        await storeDelegation(client, deps.delegation!.cipher, id, delegation, created);
      else await runPrepared(client, NOTIFY, created);
      // Both events in one statement, the last of the transaction (the chain lock is held
      // from here to COMMIT).
      await appendAuditEventsInTransaction(client, [
        {
          type: 'task.created',
          taskId: id,
          ...audit,
          data: {
            wire: input.wire,
            arguments: task.argument_summary,
            argumentHash: hash,
            idempotency: explicit ? 'explicit' : 'derived',
            deadline: task.deadline.toISOString(),
            ttlMs,
            scopes: p.scopes,
            jobId,
          },
        },
        ...(delegation
          ? [
              {
                type: 'task.delegated' as const,
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
              },
            ]
          : []),
      ]);
      await client.query('COMMIT');
      return { ok: true, task, created: true };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      if (error instanceof Refused) {
        await deps.denials.deny({
          type: 'task.denied',
          ...audit,
          reason: error.outcome.code,
          data: { verb: 'start', wire: input.wire },
        });
        return error.outcome;
      }
      throw error;
    } finally {
      client.release();
    }
  }
  throw new Error('createTask: idempotency slot kept changing under concurrent starts');
}

async function reuseExisting(
  client: PoolClient,
  owner: { tenant: string; subject: string; client: string },
  key: string,
  hash: string,
  input: StartInput,
  audit: Record<string, string>,
): Promise<StartOutcome | 'retry'> {
  const found = await client.query<TaskRow & { window_passed: boolean }>(
    // A task past its retention is gone for every verb, so it deduplicates nothing either.
    `SELECT *, (dedupe_until IS NOT NULL AND dedupe_until <= now()) OR NOT ${RETAINED}
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
    await client.query('COMMIT');
    await client.query('BEGIN');
    return 'retry';
  }
  if (existing.argument_hash !== hash) {
    throw new Refused(
      taskError(
        'idempotency_conflict',
        `Idempotency key "${input.idempotencyKey}" was already used for a different call ` +
          `(task ${existing.id}); use a new key for different arguments`,
      ),
    );
  }
  await appendAuditInTransaction(client, {
    type: 'task.deduplicated',
    taskId: existing.id,
    ...audit,
    data: { wire: input.wire, idempotency: existing.idempotency_kind },
  });
  return { ok: true, task: existing, created: false };
}

/**
 * Active-task caps, from the counts the admission statement made after the insert under the
 * tenant's lock (so the new task counts itself).
 */
function refuseOverCaps(
  counts: { user_active: number; tenant_active: number },
  limits: StartLimits,
): void {
  const { user_active, tenant_active } = counts;
  if (user_active > limits.maxActivePerUser) {
    throw new Refused(
      taskError(
        'user_limit',
        `Too many active tasks for this user (limit ${limits.maxActivePerUser}); ` +
          `retry after one of them finishes`,
        { retryAfterSeconds: 5 },
      ),
    );
  }
  if (tenant_active > limits.maxActivePerTenant) {
    throw new Refused(
      taskError(
        'tenant_limit',
        `Too many active tasks in this tenant (limit ${limits.maxActivePerTenant}); ` +
          `retry after one of them finishes`,
        { retryAfterSeconds: 5 },
      ),
    );
  }
}
