import { fileURLToPath } from 'node:url';
import { migrate, ROLES, type MigrateResult } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { installQueue } from '@mtg/tasks';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../db/migrations', import.meta.url));

/**
 * Brings the database to what the apps expect: the migrations, then pg-boss' schema and the
 * job queue, usable by the gateway and worker roles. Needs an owner/superuser URL.
 */
export async function prepareDatabase(url: string, logger: Logger): Promise<MigrateResult> {
  const result = await migrate(url, MIGRATIONS_DIR);
  logger.info('database migrated', { ...result });
  await installQueue(url, [ROLES.gateway, ROLES.worker]);
  logger.info('job queue installed');
  return result;
}
