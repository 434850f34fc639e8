/**
 * The SQL predicates every transition of app.tasks is written with, defined once. Each is a
 * fragment for a WHERE clause over app.tasks (unqualified column names).
 */

/** Not terminal: the task may still change (status working or input_required). */
export const ACTIVE = "status IN ('working', 'input_required')";

/**
 * ACTIVE for a statement that finds one task by id: the same rows (the terminal_has_end
 * constraint, migration 002, ties a terminal status to ended_at), in a form that implies none
 * of the partial indexes over active tasks (tasks_deadline, tasks_active_tenant,
 * tasks_leased). With ACTIVE, statistics taken while few tasks were active (a quiet hour,
 * then a burst) let PostgreSQL plan a full scan of one of those indexes, filtering on id, as
 * cheaper than the primary key: every lease renewal, boundary read, journal, claim and
 * settlement then read every active task (3,000 active: 209 buffers and 3.6 ms for one
 * boundary read instead of 3 buffers and 0.04 ms), until autovacuum next analyzed the table,
 * which on a table holding a million retained tasks takes 100,000 changes. With this form
 * the primary key is the only index such a statement can use.
 */
export const NOT_ENDED = 'ended_at IS NULL';

/** Some worker holds an unexpired lease on the task. */
export const LIVE_LEASE = 'lease_owner IS NOT NULL AND lease_expires_at > now()';

/**
 * The worker running the task was lost: its lease lapsed without being renewed, given back
 * or ended (whether or not the reaper has freed it yet), and no worker has claimed it since.
 * A claim sets a new expiry; a release, a park and every ending clear it.
 */
export const WORKER_LOST = "status = 'working' AND lease_expires_at < now()";

/** What a task whose worker was lost says until another worker takes it (WORKER_LOST). */
export const WORKER_LOST_MESSAGE = 'worker lost; resuming';

/**
 * The lease is still the writer's: owner and epoch both match. A takeover bumps the epoch,
 * so every later write of the previous holder matches nothing. Parameters: the positions of
 * the owner and the epoch in the statement.
 */
export const fenced = (owner: string, epoch: string) =>
  `lease_owner = ${owner} AND lease_epoch = ${epoch}`;

/** A task past its retention is gone for every verb, even before the purge removes it. */
export const RETAINED =
  "(ended_at IS NULL OR ended_at + ttl_ms * interval '1 millisecond' > now())";

/** Owner match used by every verb: tenant, subject and client all equal ($2, $3, $4). */
export const OWNER_MATCH = 'tenant = $2 AND subject = $3 AND client = $4';
