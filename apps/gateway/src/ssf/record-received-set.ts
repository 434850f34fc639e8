import type { Queryable } from '@mtg/db';

/**
 * Claims a SET's (issuer, jti): true the first time, false for a replay (RFC 8417 §2.2: a jti
 * is unique per issuer). The unique key makes "check and record" one statement, so two
 * concurrent deliveries of the same SET cannot both act.
 */
export async function recordReceivedSet(
  db: Queryable,
  issuer: string,
  jti: string,
): Promise<boolean> {
  const r = await db.query(
    `INSERT INTO app.received_sets (issuer, jti) VALUES ($1, $2)
     ON CONFLICT (issuer, jti) DO NOTHING RETURNING jti`,
    [issuer, jti],
  );
  return r.rowCount === 1;
}

/** Gives a claimed jti back when acting on the SET failed, so the transmitter's retry is not a "replay". */
export async function forgetReceivedSet(db: Queryable, issuer: string, jti: string): Promise<void> {
  await db.query('DELETE FROM app.received_sets WHERE issuer = $1 AND jti = $2', [issuer, jti]);
}

/**
 * Drops jtis older than `keepSeconds`. A SET is accepted while its iat is within the window
 * on either side of now, so a jti must be kept for at least twice the window; the caller
 * passes more than that.
 */
export async function pruneReceivedSets(db: Queryable, keepSeconds: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM app.received_sets WHERE received_at < now() - make_interval(secs => $1)`,
    [keepSeconds],
  );
  return r.rowCount ?? 0;
}
