import { fileURLToPath } from 'node:url';
import { migrate } from '@mtg/db';
import type { Logger } from '@mtg/log';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../db/migrations', import.meta.url));

/** Brings the database to the schema the apps expect. Later: the pg-boss schema and queues. */
export async function prepareDatabase(url: string, logger: Logger): Promise<void> {
  const result = await migrate(url, MIGRATIONS_DIR);
  logger.info('database migrated', result);
}
