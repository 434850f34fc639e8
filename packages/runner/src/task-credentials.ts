import { nowMs, type Clock } from '@mtg/clock';
import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import { prepared, runPrepared } from '@mtg/db';
import type { CredentialCipher, TokenExchanger } from '@mtg/identity';
import type { TaskRow } from '@mtg/tasks';
import { StopRun } from './stop.ts';

const SEALED_DELEGATION = prepared(
  `SELECT key_id, iv, ciphertext, tag, expires_at <= now() AS expired
     FROM app.task_credentials WHERE task_id = $1`,
);

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
) {
  let current:
    { token: string; expiresAt: number; obtainedAt: number; sub: string; act: unknown } | undefined;
  let stale = true;
  let inflight: Promise<string> | undefined;
  const now = () => nowMs(deps.clock);

  const refresh = async (): Promise<string> => {
    const sealed = await runPrepared<{
      key_id: string;
      iv: Buffer;
      ciphertext: Buffer;
      tag: Buffer;
      expired: boolean;
    }>(deps.pool, SEALED_DELEGATION, [task.id]);
    const row = sealed.rows[0];
    if (!row)
      throw new DelegationEnded(
        'the task has no delegation (it ended, or was created without one)',
      );
    if (row.expired)
      throw new DelegationEnded(
        'the task-bound delegation has expired (its bound is the task deadline)',
      );
    const delegation = deps.cipher.open(
      { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag },
      task.id,
    );
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
    token(): Promise<string> {
      const nearExpiry = current && current.expiresAt - now() < 30_000;
      if (current && !stale && !nearExpiry) return Promise.resolve(current.token);
      inflight ??= refresh().finally(() => {
        inflight = undefined;
      });
      return inflight;
    },
  };
}

export type TaskCredentials = ReturnType<typeof createTaskCredentials>;
