import { migrate, MIGRATIONS_DIR, ROLES, type MigrateResult } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { installQueue } from '@mtg/tasks';
import { loadToolRegistry, toolLimitsOverrides, toolPacksFromEnv } from '@mtg/tools';
import { loadUpstreams, upstreamQueue } from '@mtg/upstreams';

/**
 * Brings the database to what the apps expect: the migrations, then pg-boss' schema and one
 * queue per long tool of TOOL_PACKS (read from `env`, as the apps read it), usable by the
 * gateway and worker roles. Needs an owner/superuser URL.
 */
export async function prepareDatabase(
  url: string,
  logger: Logger,
  env: Record<string, string | undefined> = process.env,
): Promise<MigrateResult & { queues: string[] }> {
  const registry = await loadToolRegistry({
    packs: toolPacksFromEnv(env),
    env,
    ...(env.TOOL_LIMITS ? { limits: toolLimitsOverrides.parse(env.TOOL_LIMITS) } : {}),
  });
  const result = await migrate(url, MIGRATIONS_DIR);
  logger.info('database migrated', { ...result });
  // UPSTREAMS_FILE: one queue per upstream for its task-mode tools.
  const upstreams = loadUpstreams(env.UPSTREAMS_FILE).map((u) => upstreamQueue(u.name));
  const queues = [...registry.queues().values(), ...upstreams];
  await installQueue(url, [ROLES.gateway, ROLES.worker], queues);
  logger.info('job queues installed', { queues });
  return { ...result, queues };
}
