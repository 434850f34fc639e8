import { prepared, runPrepared, type Queryable } from '@mtg/db';
import type { CredentialCipher, TokenExchanger } from '@mtg/identity';
import { taskError, type TaskError } from './errors.ts';

export interface DelegationDeps {
  exchanger: TokenExchanger;
  cipher: CredentialCipher;
  /** Audience of the delegation: the worker service. */
  workerResource: string;
  /** Extra lifetime past the deadline, so the last stage can finish its result write. */
  graceSeconds: number;
}

export interface Delegation {
  token: string;
  expiresAt: number;
  scope: string[];
  act: unknown;
}

/**
 * Exchanges the caller's live token (RFC 8693) for a task-bound delegation: audience the
 * worker service, scope narrowed to the tool's, lifetime bounded by the task's deadline.
 * The caller's token is used for this one request and never stored.
 */
export async function obtainDelegation(
  deps: DelegationDeps,
  subjectToken: string,
  scope: string,
  deadlineMs: number,
): Promise<{ ok: true; delegation: Delegation } | TaskError> {
  let outcome;
  try {
    outcome = await deps.exchanger.exchange({
      subjectToken,
      target: deps.workerResource,
      scope: [scope],
      ttlSeconds: Math.ceil(deadlineMs / 1000) + deps.graceSeconds,
    });
  } catch {
    return taskError(
      'delegation_unavailable',
      'The authorization server could not be reached to delegate this task; retry shortly',
      { retryAfterSeconds: 5 },
    );
  }
  if (!outcome.ok) {
    return taskError(
      'delegation_refused',
      `The authorization server refused to delegate this task: ${outcome.description}`,
    );
  }
  return {
    ok: true,
    delegation: {
      token: outcome.token.accessToken,
      expiresAt: outcome.token.expiresAt,
      scope: outcome.token.scope,
      act: outcome.token.actor,
    },
  };
}

const STORE = `INSERT INTO app.task_credentials (task_id, key_id, iv, ciphertext, tag, expires_at)
   VALUES ($1, $2, $3, $4, $5, to_timestamp($6 / 1000.0))
   ON CONFLICT (task_id) DO UPDATE SET key_id = $2, iv = $3, ciphertext = $4, tag = $5,
     expires_at = to_timestamp($6 / 1000.0), created_at = now()`;
const STORE_DELEGATION = prepared(STORE);

/** A task's delegation sealed for storage, bound to the task id: key id, iv, ciphertext, tag, expiry (epoch ms). */
export function sealDelegation(
  cipher: CredentialCipher,
  taskId: string,
  d: Delegation,
): [keyId: string, iv: Buffer, ciphertext: Buffer, tag: Buffer, expiresAt: number] {
  const sealed = cipher.seal(d.token, taskId);
  return [sealed.keyId, sealed.iv, sealed.ciphertext, sealed.tag, d.expiresAt];
}

/** Stores (or replaces) a task's delegation, encrypted and bound to the task id. */
export async function storeDelegation(
  db: Queryable,
  cipher: CredentialCipher,
  taskId: string,
  d: Delegation,
): Promise<void> {
  await runPrepared(db, STORE_DELEGATION, [taskId, ...sealDelegation(cipher, taskId, d)]);
}
