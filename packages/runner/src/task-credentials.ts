import { nowMs, type Clock } from '@mtg/clock';
import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import { prepared, runPrepared } from '@mtg/db';
import type { CredentialCipher, SealedCredential, TokenExchanger } from '@mtg/identity';
import type { ClaimedDelegation, TaskRow } from '@mtg/tasks';
import { StopRun } from './stop.ts';

const SEALED_DELEGATION = prepared(
  `SELECT key_id, iv, ciphertext, tag, expires_at <= now() AS expired
     FROM app.task_credentials WHERE task_id = $1`,
);

/** A task's sealed delegation as an exchange needs it: absent (ended, wiped) or expired. */
export type DelegationRead = { sealed: SealedCredential; expired: boolean } | undefined;
export type ReadDelegation = () => Promise<DelegationRead>;

/**
 * Where a run's exchanges read the task's sealed delegation. The first read is the copy the
 * claim read with the lease (no round trip; expired once the time it had left at the claim
 * has passed on this process's clock); every later one reads the row again, so an exchange
 * after that still finds a delegation that ended or was wiped as before.
 */
export function createDelegationReads(
  pool: Pool,
  taskId: string,
  claimed?: ClaimedDelegation | null,
  clock?: Clock,
): ReadDelegation {
  // undefined: the claim read nothing for this run; null: it found no delegation.
  let first =
    claimed === undefined
      ? undefined
      : { claimed, until: nowMs(clock) + (claimed?.remainingMs ?? 0) };
  return async () => {
    if (first) {
      const { claimed: c, until } = first;
      first = undefined;
      return c ? { sealed: c.sealed, expired: nowMs(clock) >= until } : undefined;
    }
    const r = await runPrepared<{
      key_id: string;
      iv: Buffer;
      ciphertext: Buffer;
      tag: Buffer;
      expired: boolean;
    }>(pool, SEALED_DELEGATION, [taskId]);
    const row = r.rows[0];
    if (!row) return undefined;
    const sealed = { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag };
    return { sealed, expired: row.expired };
  };
}

/** The task's delegation ended (deadline bound reached or wiped): privileged work stops. */
export class DelegationEnded extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DelegationEnded';
  }
}

export interface TaskCredentialDeps {
  pool: Pool;
  cipher: CredentialCipher;
  /** The worker's own token exchanger (client mcp-worker). */
  exchanger: TokenExchanger;
  /** The worker's own client-credentials token, sent as actor_token. */
  actorToken: () => Promise<string>;
  /** Lifetime asked for each downstream token (minutes at most). */
  ttlSeconds: number;
  /**
   * A new stage reuses the current token when it was obtained at most this long ago (and is
   * not near expiry); 0: every stage exchanges again. The boundary check before each stage
   * and call still reads the owner's revocation, so reuse never lets a stopped task go on.
   */
  stageReuseMs?: number;
  workerId: string;
  /** The worker's clock (default: the system's); decides when a credential nears expiry. */
  clock?: Clock;
}

/**
 * Short-lived credentials for one task and one target (its audience): the delegation
 * exchanged, worker as actor (`sub` = the user, `act` = the worker). A token is reused until
 * it nears expiry within a stage, and across stages while it is younger than `stageReuseMs`;
 * the first call of a stage after that gets a fresh one. Parallel steps share an exchange
 * that is in flight. Each exchange is a `task.identity_refreshed` audit event. Revocation
 * stops the task at its next boundary (the boundary check reads it); the IdP, which refuses
 * the exchange for a disabled user, is the second line, at the next exchange.
 */
export function createTaskCredentials(
  deps: TaskCredentialDeps,
  task: TaskRow,
  target: { name: string; audience: string; scopes: string[] },
  /** The run's reads of the sealed delegation (default: each exchange reads the row). */
  readDelegation = createDelegationReads(deps.pool, task.id, undefined, deps.clock),
) {
  let current:
    { token: string; expiresAt: number; obtainedAt: number; sub: string; act: unknown } | undefined;
  let stale = true;
  let inflight: Promise<string> | undefined;
  const now = () => nowMs(deps.clock);

  const refresh = async (): Promise<string> => {
    const row = await readDelegation();
    if (!row)
      throw new DelegationEnded(
        'the task has no delegation (it ended, or was created without one)',
      );
    if (row.expired)
      throw new DelegationEnded(
        'the task-bound delegation has expired (its bound is the task deadline)',
      );
    const delegation = deps.cipher.open(row.sealed, task.id);
    const outcome = await deps.exchanger.exchange({
      subjectToken: delegation,
      actorToken: await deps.actorToken(),
      target: target.audience,
      scope: target.scopes,
      ttlSeconds: deps.ttlSeconds,
    });
    if (!outcome.ok) {
      if (outcome.code === 'subject_disabled') throw new StopRun('revoked');
      if (outcome.code === 'subject_expired')
        throw new DelegationEnded(
          `the delegation can no longer be exchanged: ${outcome.description}`,
        );
      throw new Error(`downstream credential refused: ${outcome.description}`);
    }
    const previous = current;
    current = {
      token: outcome.token.accessToken,
      expiresAt: outcome.token.expiresAt,
      obtainedAt: now(),
      sub: outcome.token.subject,
      act: outcome.token.actor,
    };
    stale = false;
    await appendAuditGrouped(deps.pool, {
      type: 'task.identity_refreshed',
      taskId: task.id,
      tenant: task.tenant,
      subject: task.subject,
      client: task.client,
      tool: task.tool,
      correlationId: task.correlation_id,
      actor: { subject: deps.workerId, kind: 'worker' },
      data: {
        target: target.name,
        from: previous
          ? { subject: previous.sub, act: previous.act, audience: target.audience }
          : { subject: task.subject, act: 'delegation', audience: 'worker' },
        to: { subject: current.sub, act: current.act, audience: target.audience },
        scope: outcome.token.scope,
        expiresAt: new Date(current.expiresAt).toISOString(),
      },
    });
    return current.token;
  };

  const token = (): Promise<string> => {
    const nearExpiry = current && current.expiresAt - now() < 30_000;
    if (current && !stale && !nearExpiry) return Promise.resolve(current.token);
    inflight ??= refresh().finally(() => {
      inflight = undefined;
    });
    return inflight;
  };

  return {
    /** A new stage begins: its first downstream call gets a fresh credential. */
    beginStage() {
      // Parallel steps that begin while an exchange is in flight share it.
      if (inflight) return;
      const young = current && now() - current.obtainedAt < (deps.stageReuseMs ?? 0);
      if (!young) stale = true;
    },
    /** The token was refused (a 401): the next call exchanges again, whatever its age. */
    invalidate() {
      if (inflight) return;
      stale = true;
    },
    token,
    /**
     * Starts the exchange the next call would make, now (a stage begins and its first call
     * will need it): the tool's own work before that call hides the exchange. Resolves when
     * it is done, whatever its outcome; a failure is the next call's, which exchanges again.
     */
    prefetch(): Promise<void> {
      return token().then(
        () => {},
        () => {},
      );
    },
  };
}

export type TaskCredentials = ReturnType<typeof createTaskCredentials>;
