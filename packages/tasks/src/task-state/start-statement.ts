import { filledAuditBody } from '@mtg/audit';
import { prepared, type PreparedStatement } from '@mtg/db';
import { TASK_SELECT } from '../task-row.ts';

/**
 * A start's whole transaction as one statement (create-task.ts): the admission checks, the
 * task's row, its job, its sealed delegation, the creation notice and the `task.created` /
 * `task.delegated` events, in that order, committed together or not at all. It was `BEGIN`,
 * five statements and `COMMIT`.
 *
 * The admission (app.start_admission, migration 200) comes first: it takes the tenant's cap
 * lock, counts the tenant's and the subject's active tasks after it, then takes the
 * principal's lock (shared) and reads the revocation after that, each read with a snapshot
 * of its own. The task is inserted only when the counts leave room for it (they do not count
 * it: it is not there yet) and the principal may start; the rest follows the inserted row
 * only, so a refused start, or one whose idempotency slot is taken (ON CONFLICT), writes
 * nothing and answers with the admission's figures for the caller to say why. The locks are
 * held to the statement's commit, as they were to the transaction's: the cap lock, then the
 * principal's, then (appending last) the audit chain's.
 *
 * Parameters: $1–$23 the task's columns as insertValues lists them; $24 / $25 the user's and
 * the tenant's active-task caps; $26 the token's `iat` (null: unknown, refused after any
 * revocation); $27 the job (pg-boss's own parameter); $28 / $29 the notice's channel and
 * payload; $30 the events' types, $31 / $32 the `task.created` body's template (its deadline
 * filled in from the row), $33 the bodies of the events after it; with a delegation, $34–$38
 * its key id, iv, ciphertext, tag and expiry (epoch ms).
 */
export function startStatement(
  job: string,
  withDelegation: boolean,
  settleWatched = false,
): PreparedStatement {
  const key = `${withDelegation ? 'd' : '-'}${settleWatched ? 'w' : '-'}${job}`;
  let statement = statements.get(key);
  if (!statement) statements.set(key, (statement = build(job, withDelegation, settleWatched)));
  return statement;
}

// One per queue (pg-boss names the queue in its statement), with and without a delegation,
// and with the task's ending watched from its start or not (`settleWatched`: a gateway that
// reads from a replica hears of every ending, docs/scaling.md).

const statements = new Map<string, PreparedStatement>();

/** The row's columns as a start fills them, in parameter order ($11 is the key twice). */
const INSERT_COLUMNS = `id, issuer, tenant, subject, client, scopes, tool, arguments,
  argument_summary, argument_hash, idempotency_key, idempotency_kind, dedupe_key,
  dedupe_window_ms, correlation_id, status_message, deadline, ttl_ms, poll_interval_ms, job_id,
  needs_live_user, stage_grants, job_queue, tool_version, tool_fingerprint, registry_fingerprint,
  settle_watched`;
const insertValues = (settleWatched: boolean) => `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
  $12, $11, $13, $14, 'queued', now() + $15 * interval '1 millisecond', $16, $17, $18, $19, 1,
  $20, $21, $22, $23, ${settleWatched}`;

/** The deadline as `Date.toISOString()` writes the one the gateway reads back (ms, floored). */
const DEADLINE_ISO = `to_char(c.deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function build(job: string, withDelegation: boolean, settleWatched: boolean): PreparedStatement {
  // pg-boss's statement reads its one parameter once: the job, or no job unless the task was
  // inserted (a json_to_recordset of no rows inserts none).
  const jobOfCreated = `(SELECT CASE WHEN count(*) = 1 THEN $27::text ELSE '[]' END FROM created)`;
  const jobInsert = job.replace(/\$1(?!\d)/g, () => jobOfCreated);
  const body = filledAuditBody('$31', '$32', `jsonb_build_object('deadline', ${DEADLINE_ISO})`);
  return prepared(`
WITH admission AS MATERIALIZED (
  SELECT user_active, tenant_active, revoked, revoked_second FROM app.start_admission($3, $4)
), created AS (
  INSERT INTO app.tasks (${INSERT_COLUMNS})
  SELECT ${insertValues(settleWatched)}
    FROM admission a
   WHERE a.user_active < $24 AND a.tenant_active < $25 AND NOT COALESCE(a.revoked, false)
     AND (a.revoked_second IS NULL OR $26::bigint > a.revoked_second)
  ON CONFLICT (tenant, subject, client, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
  RETURNING ${TASK_SELECT}
), job AS (${jobInsert}
)${
    withDelegation
      ? `, sealed AS (
  INSERT INTO app.task_credentials (task_id, key_id, iv, ciphertext, tag, expires_at)
  SELECT c.id, $34, $35, $36, $37, to_timestamp($38 / 1000.0) FROM created c
  RETURNING 1
)`
      : ''
  }, written AS (
  SELECT (SELECT count(*) FROM job)${withDelegation ? ' + (SELECT count(*) FROM sealed)' : ''} AS n
)
SELECT a.user_active, a.tenant_active, a.revoked, a.revoked_second, c.*,
       CASE WHEN c.id IS NOT NULL THEN pg_notify($28, $29) END AS notified,
       CASE WHEN c.id IS NOT NULL
            THEN audit.append_many($30::text[], ARRAY[${body}] || $33::text[], NULL::uuid[], false) END AS seqs
  FROM admission a CROSS JOIN written LEFT JOIN created c ON true`);
}
