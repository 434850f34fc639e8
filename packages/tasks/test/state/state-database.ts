import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createPool, ROLES, type Pool } from '@mtg/db';
import type { AuditEvent } from '@mtg/audit';
import type { Principal } from '@mtg/identity';
import type { LongToolDefinition } from '@mtg/tools';
import { activeCountsDrift } from '../../../../test/support/active-counts.ts';
import { createTestDatabase, type TestDatabase } from '../../../../test/support/database.ts';
import { createBoss, createJobQueue, installQueue, type JobQueue } from '../../src/job-queue.ts';
import { createDenialFold } from '../../src/fold-denials.ts';
import { newTaskId } from '../../src/task-id.ts';
import {
  claimTask,
  type Lease,
  type StartInput,
  type StartLimits,
} from '../../src/task-state/index.ts';

// The state machine's tests run each transition against a migrated database with the roles
// that run it in production (the gateway starts and cancels, a worker claims and settles), so
// a predicate or a grant that is wrong shows here, at the SQL, not through a whole stack.

export const QUEUE = 'state-test';

export interface StateDatabase {
  db: TestDatabase;
  /** As the gateway connects (mtg_gateway). */
  gateway: Pool;
  /** As a worker connects (mtg_worker). */
  worker: Pool;
  queue: JobQueue;
  /** The database owner, for a test's own setup and checks. */
  admin: pg.Pool;
  close(): Promise<void>;
}

export async function openStateDatabase(): Promise<StateDatabase> {
  const db = await createTestDatabase();
  await installQueue(db.url, [ROLES.gateway, ROLES.worker], [QUEUE]);
  const gateway = createPool({ connectionString: db.url, role: ROLES.gateway, max: 8 });
  const worker = createPool({ connectionString: db.url, role: ROLES.worker, max: 8 });
  // The project's pool, whose error handlers keep the drop's forced disconnects (57P01) of
  // idle connections from becoming unhandled errors.
  const admin = createPool({ connectionString: db.url, max: 4 });
  const boss = createBoss(gateway, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  return {
    db,
    gateway,
    worker,
    admin,
    queue: createJobQueue(boss),
    async close() {
      // Whatever the file's tests did to its tasks, the active counts the starts' admission
      // reads (migration 230) still match the tasks themselves.
      const drift = await activeCountsDrift(admin);
      await boss.stop({ graceful: false, close: false });
      await Promise.all([gateway.end(), worker.end(), admin.end()]);
      await db.drop();
      if (drift.length) throw new Error(`active counts drifted: ${JSON.stringify(drift)}`);
    },
  };
}

export const OWNER = { issuer: 'https://idp.test', tenant: 'acme', client: 'agent' };

/** A task row as a start leaves it (working, queued, nobody holds it), written directly. */
export async function insertTask(
  admin: pg.Pool,
  row: { subject?: string; tenant?: string; ttlMs?: number; deadlineMs?: number } = {},
): Promise<string> {
  const id = newTaskId();
  await admin.query(
    `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
       argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
       deadline, ttl_ms, job_id, job_queue, status_message)
     VALUES ($1, $2, $3, $4, $5, '{}', 'slow_tool', '{}', '{}', 'h', $1, 'explicit', 'c',
       now() + $6 * interval '1 millisecond', $7, $8, $9, 'queued')`,
    [
      id,
      OWNER.issuer,
      row.tenant ?? OWNER.tenant,
      row.subject ?? 'alice',
      OWNER.client,
      row.deadlineMs ?? 3_600_000,
      row.ttlMs ?? 3_600_000,
      randomUUID(),
      QUEUE,
    ],
  );
  return id;
}

/** A sealed delegation row for `taskId` (bytes 1, 2, 3 as iv, ciphertext and tag). */
export async function insertSealedDelegation(
  admin: pg.Pool,
  taskId: string,
  o: { keyId: string; expiresInS: number },
): Promise<void> {
  await admin.query(
    `INSERT INTO app.task_credentials (task_id, key_id, iv, ciphertext, tag, expires_at)
     VALUES ($1, $2, '\\x01'::bytea, '\\x02'::bytea, '\\x03'::bytea,
             now() + $3 * interval '1 second')`,
    [taskId, o.keyId, o.expiresInS],
  );
}

export async function taskRow(admin: pg.Pool, id: string) {
  const r = await admin.query(
    `SELECT status, outcome, lease_owner, lease_epoch, lease_expires_at, attempts,
            cancel_requested_by, ended_at FROM app.tasks WHERE id = $1`,
    [id],
  );
  return r.rows[0] as
    | {
        status: string;
        outcome: string | null;
        lease_owner: string | null;
        lease_epoch: number;
        lease_expires_at: Date | null;
        attempts: number;
        cancel_requested_by: Record<string, unknown> | null;
        ended_at: Date | null;
      }
    | undefined;
}

/** A step's `task.step_completed` event, of a task inserted by insertTask. */
export function stepEvent(taskId: string, step: string): AuditEvent {
  return {
    type: 'task.step_completed',
    taskId,
    tenant: 'acme',
    subject: 'alice',
    client: 'agent',
    tool: 'slow_tool',
    data: { step },
  };
}

/** The audit events of a task, oldest first, by type. */
export async function eventTypes(admin: pg.Pool, taskId: string): Promise<string[]> {
  const r = await admin.query(`SELECT type FROM audit.events WHERE task_id = $1 ORDER BY seq`, [
    taskId,
  ]);
  return r.rows.map((e: { type: string }) => e.type);
}

/** Claims `taskId` as `workerId` (a 60 s lease) and returns the lease; throws if it is not claimed. */
export async function claimLease(
  s: StateDatabase,
  taskId: string,
  workerId: string,
): Promise<Lease> {
  const c = await claimTask(s.worker, { taskId, workerId, leaseMs: 60_000 });
  if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
  return c.lease;
}

/** Moves a task's lease expiry into the past, as a worker that died leaves it. */
export async function expireLease(admin: pg.Pool, id: string): Promise<void> {
  await admin.query(
    `UPDATE app.tasks SET lease_expires_at = now() - interval '1 minute' WHERE id = $1`,
    [id],
  );
}

export const TOOL = {
  name: 'slow_tool',
  scope: 'slow:run',
  limits: { defaultDeadlineMs: 60_000, maxDeadlineMs: 600_000, retentionMs: 3_600_000 },
  summarize: () => ({}),
} as unknown as LongToolDefinition;

export const LIMITS: StartLimits = {
  maxActivePerUser: 2,
  maxActivePerTenant: 3,
  derivedDedupeWindowMs: 60_000,
  pollIntervalMs: 1000,
};

export function principal(subject: string, tenant = OWNER.tenant): Principal {
  return { ...OWNER, tenant, subject, scopes: ['slow:run'], expiresAt: 0 };
}

/** What createTask needs, with the real queue and denial fold. */
export function startDeps(s: StateDatabase, limits: StartLimits = LIMITS) {
  return {
    pool: s.gateway,
    queue: s.queue,
    limits,
    placement: () => ({ queue: QUEUE, version: '1', fingerprint: 'f', registryFingerprint: 'r' }),
    denials: createDenialFold({ pool: s.gateway, windowMs: 0, onSummaryFailed: () => {} }),
  };
}

let starts = 0;
export function startInput(subject: string, tenant = OWNER.tenant): StartInput {
  return {
    principal: principal(subject, tenant),
    tool: TOOL,
    args: { n: starts++ },
    idempotencyKey: `k-${randomUUID()}`,
    correlationId: 'c',
    wire: 'test',
  };
}
