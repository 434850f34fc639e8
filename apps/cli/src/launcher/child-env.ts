import { createHmac } from 'node:crypto';
import path from 'node:path';
import type { DevSecrets } from '@mtg/dev-secrets';
import type { DatabaseUrls } from './database-logins.ts';
import type { LauncherConfig } from './config.ts';

export type Service = 'idp' | 'downstream' | 'upstream-demo' | 'gateway' | 'worker' | 'console';

/** The stack's addresses, all on loopback. */
export function stackUrls(
  config: Pick<LauncherConfig, 'GATEWAY_PORT' | 'IDP_PORT' | 'DOWNSTREAM_PORT'> &
    Partial<Pick<LauncherConfig, 'UPSTREAM_DEMO_PORT' | 'CONSOLE_PORT'>>,
) {
  const gateway = `http://127.0.0.1:${config.GATEWAY_PORT}`;
  return {
    mcp: `${gateway}/mcp`,
    idp: `http://127.0.0.1:${config.IDP_PORT}`,
    downstream: `http://127.0.0.1:${config.DOWNSTREAM_PORT}`,
    ssfPush: `${gateway}/ssf/events`,
    upstreamDemo: `http://127.0.0.1:${config.UPSTREAM_DEMO_PORT ?? 9600}/mcp`,
    console: `http://127.0.0.1:${config.CONSOLE_PORT ?? 9700}`,
  };
}

/**
 * The Authorization header the dev IdP sends with its Shared Signals pushes and the gateway
 * requires (SSF_PUSH_AUTH): derived from the admin token, so it needs no new entry in
 * dev-secrets.json, is stable across restarts, and does not give the gateway the admin token.
 */
export function ssfPushAuthorization(secrets: Pick<DevSecrets, 'idpAdminToken'>): string {
  return `Bearer ${createHmac('sha256', secrets.idpAdminToken).update('ssf-push').digest('base64url')}`;
}

/**
 * The key the console seals its sessions with (CONSOLE_SESSION_KEY), derived from the admin
 * token like the push authorization: no new entry in dev-secrets.json, stable across
 * restarts (sessions survive one), and no other process can derive it without that token.
 */
export function consoleSessionKey(secrets: Pick<DevSecrets, 'idpAdminToken'>): string {
  return createHmac('sha256', secrets.idpAdminToken).update('console-session-key').digest('base64');
}

/**
 * The environment of one child: the launcher's own (PATH, LOG_LEVEL, AUTH_* overrides…),
 * the stack's addresses, and only the secrets that process needs.
 */
export function childEnv(
  service: Service,
  options: {
    config: LauncherConfig;
    /** Each database process's own login (database-logins.ts); never the owner's URL. */
    databaseUrls: DatabaseUrls;
    /** The console's login (derived-logins.ts), a member of mtg_console only. */
    consoleDatabaseUrl?: string;
    secrets: DevSecrets;
    /** Resolved DATA_DIR, so every process agrees on it (the IdP keeps its keys there). */
    dataDir: string;
    workerId?: string;
    /** 1-based number of the worker: worker N gets its own WORKER_METRICS_PORT. */
    workerIndex?: number;
    base?: NodeJS.ProcessEnv;
  },
): NodeJS.ProcessEnv {
  const { config, secrets } = options;
  const urls = stackUrls(config);
  const env: NodeJS.ProcessEnv = {
    ...(options.base ?? process.env),
    DATA_DIR: options.dataDir,
    GATEWAY_PORT: String(config.GATEWAY_PORT),
    IDP_PORT: String(config.IDP_PORT),
    DOWNSTREAM_PORT: String(config.DOWNSTREAM_PORT),
    IDP_ISSUER: urls.idp,
    GATEWAY_RESOURCE: urls.mcp,
    DOWNSTREAM_URL: urls.downstream,
    SSF_PUSH_URL: urls.ssfPush,
  };
  if (config.UPSTREAM_DEMO_PORT) env.UPSTREAM_DEMO_PORT = String(config.UPSTREAM_DEMO_PORT);
  // An operator's own SSF_PUSH_AUTH (inherited above) wins over the derived one.
  const pushAuth = env.SSF_PUSH_AUTH ?? ssfPushAuthorization(secrets);
  // The launcher's own DATABASE_URL (the owner's, inherited above) goes to no child.
  delete env.DATABASE_URL;
  // The IdP and the demo upstream use no database; the console has a login of its own.
  if (service === 'console') env.DATABASE_URL = options.consoleDatabaseUrl;
  else if (service !== 'idp' && service !== 'upstream-demo')
    env.DATABASE_URL = options.databaseUrls[service];
  switch (service) {
    case 'idp':
      env.IDP_CLIENT_SECRETS = JSON.stringify(secrets.clientSecrets);
      env.IDP_ADMIN_TOKEN = secrets.idpAdminToken;
      env.SSF_PUSH_AUTH = pushAuth;
      break;
    case 'gateway':
      env.CLIENT_ID = 'mcp-gateway';
      env.SSF_PUSH_AUTH = pushAuth;
      env.CLIENT_SECRET = secrets.clientSecrets['mcp-gateway'];
      env.CREDENTIAL_KEY = secrets.credentialKey;
      break;
    case 'worker':
      env.CLIENT_ID = 'mcp-worker';
      env.CLIENT_SECRET = secrets.clientSecrets['mcp-worker'];
      env.CREDENTIAL_KEY = secrets.credentialKey;
      env.WORKER_ID = options.workerId;
      if (config.WORKER_METRICS_PORT && options.workerIndex)
        env.WORKER_METRICS_PORT = String(config.WORKER_METRICS_PORT + options.workerIndex - 1);
      break;
    case 'downstream':
    case 'upstream-demo':
      break;
    case 'console':
      env.CONSOLE_PORT = String(config.CONSOLE_PORT);
      // An operator's own key (inherited above) wins over the derived one.
      env.CONSOLE_SESSION_KEY ??= consoleSessionKey(secrets);
      break;
  }
  return env;
}

/** Where the launcher writes the UPSTREAMS_FILE that registers the demo upstream. */
export function demoUpstreamsFile(dataDir: string): string {
  return path.join(dataDir, 'upstreams.yaml');
}

/** The UPSTREAMS_FILE of `npm start`: the demo upstream under prefix `demo.`, scope `upstream:demo`. */
export function demoUpstreamsYaml(config: Pick<LauncherConfig, 'UPSTREAM_DEMO_PORT'>): string {
  return [
    '# Written by `npm start`: the demo upstream MCP server (apps/upstream-demo).',
    'upstreams:',
    '  demo:',
    `    url: http://127.0.0.1:${config.UPSTREAM_DEMO_PORT}/mcp`,
    '    prefix: demo.',
    '    scope: upstream:demo',
    '    tools:',
    '      export_ledger: { mode: task }',
    '',
  ].join('\n');
}
