import type pg from 'pg';
import { readChain, readChainSession } from '../chain/read-chain.ts';
import { ARCHIVE_KIND, ARCHIVE_VERSION, type ArchiveHeader } from './archive-format.ts';

/** A closed month as audit.partition_bounds() describes it. */
export interface MonthBounds {
  partition: string;
  rangeFrom: string;
  rangeTo: string;
  firstSeq: number;
  firstPrevHash: string;
  lastSeq: number;
  lastHash: string;
}

/**
 * Writes one month as an archive (archive-format.ts): the header, the checkpoints that bound
 * it, then its events read in one snapshot, a batch at a time (`write` is awaited per line,
 * so a slow disk holds the reading back). `client` must not be in a transaction.
 */
export async function exportMonth(
  client: pg.ClientBase,
  month: MonthBounds,
  checkpoints: ReadonlyArray<{ seq: number; hash: string; jws: string }>,
  write: (line: string) => Promise<void>,
): Promise<{ events: number }> {
  const header: ArchiveHeader = {
    archive: ARCHIVE_KIND,
    version: ARCHIVE_VERSION,
    ...month,
    events: month.lastSeq - month.firstSeq + 1,
  };
  await write(JSON.stringify(header));
  for (const c of checkpoints) await write(JSON.stringify({ checkpoint: c }));
  let events = 0;
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await readChainSession(client);
    for await (const batch of readChain(client, { fromSeq: month.firstSeq, toSeq: month.lastSeq }))
      for (const event of batch) {
        await write(JSON.stringify({ event }));
        events++;
      }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
  return { events };
}
