import { prepared, runPrepared, type Queryable } from '@mtg/db';

/** A request's `_meta.progressToken`: a string or an integer (MCP). */
export type ProgressToken = string | number;

/** The longest progress token kept; a longer one is ignored (no progress is sent). */
export const MAX_PROGRESS_TOKEN_LENGTH = 200;

/** The progress token of a request's `_meta`, when it carries a usable one. */
export function progressTokenOf(
  meta: Record<string, unknown> | undefined,
): ProgressToken | undefined {
  const token = meta?.progressToken;
  if (typeof token === 'string' && token.length > 0 && token.length <= MAX_PROGRESS_TOKEN_LENGTH)
    return token;
  if (typeof token === 'number' && Number.isSafeInteger(token)) return token;
  return undefined;
}

const REMEMBER = prepared(
  `INSERT INTO app.task_progress_tokens (task_id, token) VALUES ($1, $2::jsonb)
   ON CONFLICT (task_id) DO UPDATE SET token = EXCLUDED.token,
     notified = CASE WHEN app.task_progress_tokens.token = EXCLUDED.token
                     THEN app.task_progress_tokens.notified END`,
);

/** The task's progress token from now on: the latest call that started or joined it. */
export async function rememberProgressToken(
  db: Queryable,
  taskId: string,
  token: ProgressToken,
): Promise<void> {
  await runPrepared(db, REMEMBER, [taskId, JSON.stringify(token)]);
}

const READ = prepared(`SELECT token FROM app.task_progress_tokens WHERE task_id = $1`);

export async function readProgressToken(
  db: Queryable,
  taskId: string,
): Promise<ProgressToken | undefined> {
  const r = await runPrepared<{ token: ProgressToken }>(db, READ, [taskId]);
  return r.rows[0]?.token;
}

const CLAIM = prepared(
  `UPDATE app.task_progress_tokens SET notified = $3
    WHERE task_id = $1 AND token = $2::jsonb AND (notified IS NULL OR notified < $3)
    RETURNING task_id`,
);

/**
 * Whether a notification of `progress` may go out with `token`: true once for each value
 * above the last one sent with it (by any stream, on any replica), false otherwise or once
 * another call's token has replaced it.
 */
export async function claimProgressNotice(
  db: Queryable,
  taskId: string,
  token: ProgressToken,
  progress: number,
): Promise<boolean> {
  const r = await runPrepared(db, CLAIM, [taskId, JSON.stringify(token), progress]);
  return (r.rowCount ?? 0) > 0;
}
