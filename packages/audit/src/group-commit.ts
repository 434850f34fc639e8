import { prepared, runPrepared, type Queryable } from '@mtg/db';

/** The two ways in to the chain (packages/db/migrations 003, 030), prepared once per connection. */
export const APPEND = prepared('SELECT audit.append($1, $2) AS seq');
export const APPEND_MANY = prepared('SELECT audit.append_many($1::text[], $2::text[]) AS seqs');

/** Most events one commit carries; more wait for the next. */
export const MAX_GROUP = 256;

interface Pending {
  type: string;
  body: string;
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
 * alone: an event that cannot be appended fails its own caller, not its neighbours.
 */
export function createGroupCommit(db: Queryable): (type: string, body: string) => Promise<number> {
  const queue: Pending[] = [];
  let flushing = false;

  async function appendOne(p: Pending): Promise<void> {
    try {
      const r = await runPrepared<{ seq: string }>(db, APPEND, [p.type, p.body]);
      p.resolve(Number(r.rows[0]!.seq));
    } catch (error) {
      p.reject(error);
    }
  }

  async function appendGroup(group: Pending[]): Promise<void> {
    if (group.length === 1) return appendOne(group[0]!);
    let seqs: unknown[];
    try {
      // One statement: one transaction, one hold of the chain lock, one commit.
      const r = await runPrepared<{ seqs: unknown[] }>(db, APPEND_MANY, [
        group.map((p) => p.type),
        group.map((p) => p.body),
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
      queue.push({ type, body, resolve, reject });
      if (!flushing) void flush();
    });
}
