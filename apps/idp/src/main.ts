import { ConfigError, parseConfig } from '@mtg/config';
import { createLogger } from '@mtg/log';
import { loadTargets, loadToolRegistry, toolPacksFromEnv } from '@mtg/tools';
import { dataDir, loadOrCreateDevSecrets } from '@mtg/dev-secrets';
import type { StaticClientId } from './clients.ts';
import { idpConfigSchema } from './config.ts';
import { startIdp } from './create-idp.ts';
import { packResources } from './pack-resources.ts';
import { loadUpstreams } from '@mtg/upstreams';

const logger = createLogger('idp');

async function main(): Promise<void> {
  const config = parseConfig(idpConfigSchema, process.env);
  const dir = dataDir({ DATA_DIR: config.DATA_DIR });

  // The development default: secrets generated once into <DATA_DIR>/dev-secrets.json and
  // shared with the other processes of the local stack.
  const devSecrets =
    config.IDP_CLIENT_SECRETS && config.IDP_ADMIN_TOKEN
      ? undefined
      : await loadOrCreateDevSecrets(dir);
  const clientSecrets = (config.IDP_CLIENT_SECRETS ?? devSecrets?.clientSecrets) as Record<
    StaticClientId,
    string
  >;
  const adminToken = (config.IDP_ADMIN_TOKEN ?? devSecrets?.idpAdminToken) as string;

  // The same packs and targets as the gateway and workers (the environment is shared).
  const registry = await loadToolRegistry({
    packs: toolPacksFromEnv(process.env),
    env: process.env,
  });
  const targets = loadTargets({
    ...(config.TARGETS_FILE ? { file: config.TARGETS_FILE } : {}),
    downstreamUrl: config.DOWNSTREAM_RESOURCE,
    downstreamResource: config.DOWNSTREAM_RESOURCE,
  });
  // Upstream MCP servers (UPSTREAMS_FILE): their audiences and the scopes of their tools.
  const upstreams = loadUpstreams(config.UPSTREAMS_FILE);
  const packs = packResources(registry, targets, { downstream: config.DOWNSTREAM_RESOURCE });
  const running = await startIdp({
    port: config.IDP_PORT,
    host: config.IDP_HOST,
    issuer: config.IDP_ISSUER,
    dataDir: dir,
    clientSecrets,
    adminToken,
    resources: {
      gateway: config.GATEWAY_RESOURCE,
      worker: config.WORKER_RESOURCE,
      downstream: config.DOWNSTREAM_RESOURCE,
      ...packs,
      upstreams: upstreams.map((u) => u.audience),
      scopes: [
        ...new Set([
          ...(packs.scopes ?? []),
          ...upstreams.flatMap((u) => [
            u.scope,
            ...Object.values(u.tools).flatMap((t) => (t.scope ? [t.scope] : [])),
          ]),
        ]),
      ],
    },
    ...(config.IDP_EXCHANGE_TARGETS ? { exchangeTargets: config.IDP_EXCHANGE_TARGETS } : {}),
    accessTokenTtl: config.IDP_ACCESS_TOKEN_TTL,
    ssfPush: config.SSF_PUSH_URL
      ? { url: config.SSF_PUSH_URL, authorization: config.SSF_PUSH_AUTH }
      : undefined,
    logger,
  });

  logger.info('listening', {
    url: running.url,
    issuer: running.idp.issuer,
    dataDir: dir,
    secrets: devSecrets ? 'dev-secrets.json' : 'environment',
    ssfPushUrl: config.SSF_PUSH_URL ?? null,
  });
  process.send?.({ type: 'ready', service: 'idp', url: running.url, issuer: running.idp.issuer });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping', { signal });
    running.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('close failed', { error });
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // Started by a launcher that has gone away (e.g. SIGKILLed): do not outlive it.
  process.once('disconnect', () => stop('launcher gone'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    logger.error(error.message, { code: error.code, issues: error.issues });
  } else {
    logger.error('idp failed to start', { error });
  }
  process.exitCode = 1;
});
