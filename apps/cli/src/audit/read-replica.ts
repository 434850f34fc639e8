import type pg from 'pg';
import { describeDatabaseUrl } from '../launcher/check-database.ts';
import { connect, messageOf } from './database.ts';

/**
 * The connection the audit CLI reads through. With DATABASE_READ_URL, a hot standby — but
 * only one that has replayed everything the primary had committed when the command began
 * (it may take `maxWaitMs` to get there), so an auditor never misses an event written just
 * before: e.g. the denial they are looking into. A replica that is unreachable, is not a
 * standby, or stays behind leaves the reading to the primary, and says so on stderr.
 */
export async function connectForReading(options: {
  url: string;
  where: string;
  readUrl?: string;
  role?: string;
  name: string;
  maxWaitMs: number;
  note: (line: string) => void;
}): Promise<pg.Client> {
  const primary = await connect(options.url, options.where, options.role, options.name);
  if (!options.readUrl) return primary;
  const at = (await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'))
    .rows[0]!.lsn;
  const readWhere = describeDatabaseUrl(options.readUrl);
  let replica: pg.Client;
  try {
    replica = await connect(options.readUrl, readWhere, options.role, options.name);
  } catch (error) {
    options.note(
      `read replica ${readWhere} unreachable (${messageOf(error)}): reading the primary`,
    );
    return primary;
  }
  const until = performance.now() + options.maxWaitMs;
  try {
    for (;;) {
      const r = await replica.query<{ standby: boolean; caught_up: boolean | null }>(
        `SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up`,
        [at],
      );
      const { standby, caught_up } = r.rows[0]!;
      if (!standby) {
        options.note(`${readWhere} is not a hot standby: reading the primary`);
        break;
      }
      if (caught_up) {
        await primary.end().catch(() => {});
        options.note(`reading the replica ${readWhere} (replayed up to ${at})`);
        return replica;
      }
      if (performance.now() >= until) {
        options.note(
          `read replica ${readWhere} has not replayed up to ${at} within ${options.maxWaitMs} ms: reading the primary`,
        );
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch (error) {
    options.note(`read replica ${readWhere} failed (${messageOf(error)}): reading the primary`);
  }
  await replica.end().catch(() => {});
  return primary;
}
