import type pg from 'pg';
import { readChain, readChainSession } from '../chain/read-chain.ts';
import type { ChainHead } from '../checkpoint/sign-checkpoint.ts';
import {
  ARCHIVE_KIND,
  ARCHIVE_VERSION,
  type ArchiveChain,
  type ArchiveHeader,
} from './archive-format.ts';

/** A closed month as audit.partition_bounds() describes it, one entry per chain. */
export interface MonthBounds {
  partition: string;
  rangeFrom: string;
  rangeTo: string;
  chains: ArchiveChain[];
}

/**
 * Writes one month as an archive (archive-format.ts): the header, the checkpoints that bound
 * it, then its events read in one snapshot, chain by chain, a batch at a time (`write` is
 * awaited per line, so a slow disk holds the reading back). `client` must not be in a
 * transaction.
 */
export async function exportMonth(
  client: pg.ClientBase,
  month: MonthBounds,
  checkpoints: ReadonlyArray<{ jws: string; heads?: ChainHead[] }>,
  write: (line: string) => Promise<void>,
  legacyUntil = 0,
): Promise<{ events: number }> {
  const header: ArchiveHeader = {
    archive: ARCHIVE_KIND,
    version: ARCHIVE_VERSION,
    ...month,
    events: month.chains.reduce((n, c) => n + c.events, 0),
  };
  await write(JSON.stringify(header));
  for (const c of checkpoints) await write(JSON.stringify({ checkpoint: c }));
  let events = 0;
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await readChainSession(client);
    for (const c of month.chains) {
      for await (const batch of readChain(client, {
        chain: c.chain,
        legacyUntil,
        fromSeq: c.firstSeq,
        toSeq: c.lastSeq,
      }))
        for (const event of batch) {
          await write(JSON.stringify({ event }));
          events++;
        }
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
  return { events };
}
