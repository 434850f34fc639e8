import type { Queryable } from '@mtg/db';

/**
 * Proves the pool works and runs as `role`: createPool's SET ROLE failing (role missing, not
 * granted) would otherwise go unnoticed and leave queries running as the login user.
 */
export async function checkDatabase(db: Queryable, role: string): Promise<void> {
  const { rows } = await db.query<{ role: string }>('SELECT current_user AS role');
  if (rows[0]?.role !== role) {
    throw new Error(
      `database connection runs as "${rows[0]?.role}", not "${role}": run the migrations ` +
        `(npm run migrate) and make sure the login role may SET ROLE ${role}`,
    );
  }
}
