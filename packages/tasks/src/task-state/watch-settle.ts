import { prepared, runPrepared, type Queryable } from '@mtg/db';
import { NOT_ENDED } from './predicates.ts';

const WATCH = prepared(
  `UPDATE app.tasks SET settle_watched = true WHERE id = $1 AND ${NOT_ENDED} RETURNING 1`,
);

/**
 * Asks for a notification when the task ends (`mtg_task_settled`, which a settlement sends
 * only for a task someone watches: settle-task.ts), before a wait for it. True: the task had
 * not ended when this committed, so its ending, whenever it comes, notifies. False: it has
 * ended (or is gone), so there is nothing to wait for: read it again. Listen first, then
 * watch, so a settlement between the two is not missed.
 *
 * The settlement reads the flag from the row it updates, not from its snapshot: a watch
 * that commits while the settlement waits for the row (or after its snapshot) is seen.
 */
export async function watchSettle(db: Queryable, taskId: string): Promise<boolean> {
  const r = await runPrepared(db, WATCH, [taskId]);
  return r.rowCount === 1;
}
