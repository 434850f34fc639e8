import { databaseFailureOf, prepared, runPrepared, type Queryable } from '@mtg/db';
import { newEventKey } from './event-key.ts';

/**
 * SQL that appends one event from inside a statement: `type` and `body` are SQL expressions
 * (text). It calls the plpgsql `audit.append_many` directly: `audit.append(type, body)`, the
 * SQL-language wrapper of migration 030, is a SECURITY DEFINER function, which PostgreSQL never
 * inlines, so every call parsed, analyzed and planned the wrapper's query again (about 0.06 ms
 * of the backend's CPU per event; docs/scaling.md). The event is the same either way.
 */
export function appendEventSql(type: string, body: string): string {
  return `(audit.append_many(ARRAY[(${type})::text], ARRAY[(${body})::text], NULL::uuid[], false))[1]`;
}

/** The two ways in to the chain (packages/db/migrations 030, 140), prepared once per connection. */
export const APPEND = prepared(`SELECT ${appendEventSql('$1', '$2')} AS seq`);
export const APPEND_MANY = prepared(
  'SELECT audit.append_many($1::text[], $2::text[], NULL::uuid[], false) AS seqs',
);
/**
 * The same with an event key each (migration 140), for appends that are their own
 * transaction, whose writer may send them again without knowing whether the first attempt
 * committed. The last argument says it may have been sent before: then an event whose key
 * its chain holds is not appended again, and its stored seq comes back.
 */
export const APPEND_KEYED = prepared(
  'SELECT (audit.append_many(ARRAY[$1::text], ARRAY[$2::text], ARRAY[$3::uuid], $4))[1] AS seq',
);
export const APPEND_MANY_KEYED = prepared(
  'SELECT audit.append_many($1::text[], $2::text[], $3::uuid[], $4) AS seqs',
);

/** Most events one commit carries; more wait for the next. */
export const MAX_GROUP = 256;

interface Pending {
  type: string;
  body: string;
  /** Generated once per event: every attempt to append it carries the same key. */
  key: string;
  /** An attempt was sent already (the key may be stored). */
  sent: boolean;
  resolve: (seq: number) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for events appended outside any transaction of the caller's (on a pool).
 *
 * Every append holds the chain lock through its commit and that commit's WAL flush, so
 * one-event-per-commit appends are strictly serial however many processes write. Here,
 * while one group commits, the events appended meanwhile queue; the next group appends
 * them all in ONE statement (one transaction, one lock hold, one flush). Nothing waits on
 * a timer: a lone event commits at once. Each caller's promise settles only after the
 * commit holding its event, with that event's sequence number, exactly as a direct append.
 *
 * A group fails as a whole (one statement), so on any error each of its events is retried
 * alone: an event that cannot be appended fails its own caller, not its neighbours. The
 * error may also be a connection that broke after the group was sent, and the group may have
 * committed (an unknown commit outcome): each event carries a key generated here, and the
 * retry of an event its chain already holds returns the stored event instead of appending
 * a second copy (packages/db/migrations/140_audit_event_keys.sql).
 */
export function createGroupCommit(db: Queryable): (type: string, body: string) => Promise<number> {
  const queue: Pending[] = [];
  let flushing = false;

  async function appendOne(p: Pending): Promise<void> {
    // A connection that broke under the append is tried once more on another (its key makes
    // that safe whether or not the first attempt committed); any other error is the event's.
    for (let attempt = 1; ; attempt++) {
      try {
        const retry = p.sent;
        p.sent = true;
        const r = await runPrepared<{ seq: string }>(db, APPEND_KEYED, [
          p.type,
          p.body,
          p.key,
          retry,
        ]);
        return p.resolve(Number(r.rows[0]!.seq));
      } catch (error) {
        if (attempt < 2 && databaseFailureOf(error)?.code === 'database_unavailable') continue;
        return p.reject(error);
      }
    }
  }

  async function appendGroup(group: Pending[]): Promise<void> {
    if (group.length === 1) return appendOne(group[0]!);
    let seqs: unknown[];
    // A group is each event's first attempt: nothing to look up; its retries will.
    for (const p of group) p.sent = true;
    try {
      // One statement: one transaction, one hold of the chain lock, one commit.
      const r = await runPrepared<{ seqs: unknown[] }>(db, APPEND_MANY_KEYED, [
        group.map((p) => p.type),
        group.map((p) => p.body),
        group.map((p) => p.key),
        false,
      ]);
      seqs = r.rows[0]!.seqs;
    } catch {
      for (const p of group) await appendOne(p);
      return;
    }
    group.forEach((p, i) => p.resolve(Number(seqs[i])));
  }

  async function flush(): Promise<void> {
    flushing = true;
    try {
      while (queue.length > 0) {
        await appendGroup(queue.splice(0, MAX_GROUP));
      }
    } finally {
      flushing = false;
    }
  }

  return (type, body) =>
    new Promise<number>((resolve, reject) => {
      queue.push({ type, body, key: newEventKey(), sent: false, resolve, reject });
      if (!flushing) void flush();
    });
}
