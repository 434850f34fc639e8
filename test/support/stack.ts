import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import { createRemoteJWKSet } from 'jose';
import { createPool, ROLES } from '@mtg/db';
import { createLogger, type Logger } from '@mtg/log';
import { installQueue } from '@mtg/tasks';
import { parseConfig } from '@mtg/config';
import { startIdp } from '@mtg/app-idp';
import { devUserToken } from '../../apps/cli/src/lib/dev-user-token.ts';
import { buildGateway, gatewayConfigSchema } from '@mtg/app-gateway';
import { createGatewayServer } from '../../apps/gateway/src/tls.ts';
import { buildWorker, workerConfigSchema, type Worker } from '@mtg/app-worker';
import { packResources } from '../../apps/idp/src/pack-resources.ts';
import {
  loadTargets,
  loadToolRegistry,
  toolLimitsOverrides,
  toolPacksFromEnv,
  type ToolRegistry,
} from '@mtg/tools';
import { apiRoutes, writesRoute } from '../../apps/downstream/src/api/api-routes.ts';
import { generateDevSecrets } from '@mtg/dev-secrets';
import { loadUpstreams, upstreamQueue } from '@mtg/upstreams';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { testClock, type TestClock } from './test-clock.ts';
import { freePort } from './free-port.ts';

export { freePort };

export interface Stack {
  db: TestDatabase;
  issuer: string;
  mcpUrl: string;
  gatewayUrl: string;
  downstreamUrl: string;
  secrets: ReturnType<typeof generateDevSecrets>;
  workers: Worker[];
  /** The time the gateway and the workers read (not the database's: move rows for that). */
  clock: TestClock;
  /** A user token from the dev IdP through its real dev-user grant. */
  token(
    sub: string,
    tenant: string,
    options?: { client?: string; scope?: string; ttl?: number; resource?: string },
  ): Promise<string>;
  /** Writes the downstream accepted for a task. */
  writes(
    taskId: string,
  ): Promise<
    Array<{ taskId: string; idempotencyKey: string; sub: string; act: unknown; at: string }>
  >;
  /** Starts the gateway again on the same port (for restart tests). */
  restartGateway(): Promise<void>;
  /** The registry the gateway was built with (TOOL_PACKS of `env`). */
  registry: ToolRegistry;
  /**
   * Disables or enables a user through the dev IdP's admin API (as `npm run idp:user` does);
   * the IdP then pushes its security events to the gateway's /ssf/events. Returns the IdP's
   * answer, with each push's delivery status.
   */
  idpUser(action: 'disable' | 'enable', sub: string, tenant: string): Promise<IdpUserAnswer>;
  addWorker(env?: Record<string, string>): Promise<Worker>;
  env: Record<string, string>;
  close(): Promise<void>;
}

export interface IdpUserAnswer {
  user: { sub: string; tenant: string; disabled: boolean };
  push:
    | { pushed: false; reason: string }
    | {
        pushed: true;
        url: string;
        deliveries: Array<{
          event: string;
          jti: string;
          delivered: boolean;
          status?: number;
          error?: string;
        }>;
      };
}

export function listen(app: http.RequestListener, port: number): Promise<http.Server> {
  const server = http.createServer(app);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/** The gateway's own listener: HTTPS when its config has GATEWAY_TLS_CERT/KEY (tls.ts). */
function listenGateway(
  gateway: { app: http.RequestListener; tls?: Parameters<typeof createGatewayServer>[1] },
  port: number,
): Promise<http.Server> {
  const server = createGatewayServer(gateway.app, gateway.tls);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

export async function closeServer(server: http.Server): Promise<void> {
  await new Promise<void>((r) => {
    server.close(() => r());
    server.closeAllConnections();
  });
}

/** The demo downstream system on `port`, over its own login, trusting the dev IdP. */
export async function startTestDownstream(o: {
  loginUrl: string;
  issuer: string;
  url: string;
  port: number;
  logger: Logger;
}): Promise<{ close(): Promise<void> }> {
  const pool = createPool({ connectionString: o.loginUrl, role: ROLES.downstream });
  const app = express();
  app.use(writesRoute(pool));
  app.use(
    '/api',
    apiRoutes({
      pool,
      keys: createRemoteJWKSet(new URL(`${o.issuer}/jwks`)),
      issuer: o.issuer,
      audience: o.url,
      logger: o.logger,
    }),
  );
  const server = await listen(app, o.port);
  return {
    async close() {
      await closeServer(server);
      await pool.end();
    },
  };
}

/**
 * The whole product in one test process, on loopback: the real dev IdP, the downstream demo,
 * a gateway and `workers` workers, over a fresh migrated database. Only the processes are
 * collapsed; every hop is real HTTP and real PostgreSQL.
 */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  // What has started so far, undone if a later part fails to start: a stack half started
  // would keep servers and pools open, and jest would never exit.
  const undo: Array<() => Promise<unknown>> = [];
  try {
    return await buildStack(options, undo);
  } catch (err) {
    for (const step of undo.reverse()) await step().catch(() => {});
    throw err;
  }
}

interface StackOptions {
  workers?: number;
  env?: Record<string, string>;
  /** What every process of the stack logs to (default: silent unless TEST_LOGS is set). */
  logger?: Logger;
  /** Told the IdP's issuer before the gateway starts (servers that verify its tokens). */
  onIssuer?: (issuer: string) => void;
}

async function buildStack(
  options: StackOptions,
  undo: Array<() => Promise<unknown>>,
): Promise<Stack> {
  const logger = options.logger ?? createLogger('test', { silent: !process.env.TEST_LOGS });
  const db = await createTestDatabase();
  undo.push(() => db.drop());
  const secrets = generateDevSecrets();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-stack-'));
  undo.push(() => rm(dataDir, { recursive: true, force: true }));
  const gatewayPort = await freePort();
  const downstreamPort = await freePort();
  // GATEWAY_TLS_CERT/KEY in `env` make the gateway serve HTTPS: its canonical URL (the
  // token audience) is then https.
  const gatewayScheme = options.env?.GATEWAY_TLS_CERT ? 'https' : 'http';
  const mcpUrl = `${gatewayScheme}://127.0.0.1:${gatewayPort}/mcp`;
  const downstreamUrl = `http://127.0.0.1:${downstreamPort}`;

  // One registry for the stack, from TOOL_PACKS (default: the demo pack), as a process would.
  const baseEnv: Record<string, string> = { DEMO_STEP_MS: '200', ...options.env };
  const registry = await registryFor(baseEnv);
  await installQueue(db.url, [ROLES.gateway, ROLES.worker], registry.queues().values());
  // UPSTREAMS_FILE: one queue per upstream, and the IdP learns their audiences.
  const upstreams = loadUpstreams(baseEnv.UPSTREAMS_FILE);
  if (upstreams.length) {
    await installQueue(
      db.url,
      [ROLES.gateway, ROLES.worker],
      upstreams.map((u) => upstreamQueue(u.name)),
    );
  }
  const targets = loadTargets({
    ...(baseEnv.TARGETS_FILE ? { file: baseEnv.TARGETS_FILE } : {}),
    downstreamUrl,
    downstreamResource: downstreamUrl,
  });

  const idp = await startIdp({
    port: 0,
    host: '127.0.0.1',
    dataDir,
    clientSecrets: secrets.clientSecrets,
    adminToken: secrets.idpAdminToken,
    resources: {
      gateway: mcpUrl,
      worker: 'urn:mcp-task-gateway:worker',
      downstream: downstreamUrl,
      ...packResources(registry, targets, { downstream: downstreamUrl }),
      upstreams: upstreams.map((u) => u.audience),
      ...(upstreams.length
        ? {
            scopes: [
              ...new Set([
                ...packResources(registry, targets, { downstream: downstreamUrl }).scopes!,
                ...upstreams.map((u) => u.scope),
              ]),
            ],
          }
        : {}),
    },
    accessTokenTtl: 3600,
    // The IdP is the gateway's Shared Signals transmitter; SSF_PUSH_AUTH in `env` is the
    // Authorization header both sides then agree on.
    ssfPush: {
      url: `http://127.0.0.1:${gatewayPort}/ssf/events`,
      ...(options.env?.SSF_PUSH_AUTH ? { authorization: options.env.SSF_PUSH_AUTH } : {}),
    },
    logger,
  });
  undo.push(() => idp.close());
  const issuer = idp.idp.issuer;
  options.onIssuer?.(issuer);

  const downstream = await startTestDownstream({
    loginUrl: db.logins.downstream,
    issuer,
    url: downstreamUrl,
    port: downstreamPort,
    logger,
  });
  undo.push(() => downstream.close());

  const env: Record<string, string> = {
    // Each process its own login (db.logins); db.url, the owner's, goes to none of them.
    DATABASE_URL: db.logins.gateway,
    GATEWAY_PORT: String(gatewayPort),
    GATEWAY_RESOURCE: mcpUrl,
    AUTH_ISSUER: issuer,
    CLIENT_SECRET: secrets.clientSecrets['mcp-gateway'],
    CREDENTIAL_KEY: secrets.credentialKey,
    DOWNSTREAM_URL: downstreamUrl,
    WORKER_LEASE_MS: '2000',
    ...baseEnv,
  };
  const clock = testClock();
  let gateway = await buildGateway(parseConfig(gatewayConfigSchema, env), logger, {
    registry,
    clock,
  });
  undo.push(() => gateway.close());
  let gatewayServer = await listenGateway(gateway, gatewayPort);
  undo.push(() => closeServer(gatewayServer));

  const workers: Worker[] = [];
  const addWorker = async (extra: Record<string, string> = {}) => {
    const workerEnv = {
      ...env,
      DATABASE_URL: db.logins.worker,
      CLIENT_ID: 'mcp-worker',
      CLIENT_SECRET: secrets.clientSecrets['mcp-worker'],
      WORKER_ID: `test-worker-${workers.length + 1}`,
      ...extra,
    };
    // Each worker loads its own registry from its environment, as a process would: given
    // other packs or settings (another version of a tool), its queues are installed as
    // `npm run migrate` would for its packs.
    const own = await registryFor(workerEnv);
    if (own.fingerprint !== registry.fingerprint) {
      await installQueue(db.url, [ROLES.gateway, ROLES.worker], own.queues().values());
    }
    const w = await buildWorker(parseConfig(workerConfigSchema, workerEnv), own, logger, {
      clock,
    });
    await w.start();
    undo.push(() => w.stop());
    workers.push(w);
    return w;
  };
  for (let i = 0; i < (options.workers ?? 1); i++) await addWorker();

  return {
    db,
    issuer,
    mcpUrl,
    gatewayUrl: `${gatewayScheme}://127.0.0.1:${gatewayPort}`,
    downstreamUrl,
    secrets,
    workers,
    clock,
    env,
    registry,
    addWorker,
    token(sub, tenant, o = {}) {
      const client = o.client ?? 'mcp-agent';
      return devUserToken({
        issuer,
        client,
        clientSecret: secrets.clientSecrets[client as keyof typeof secrets.clientSecrets],
        sub,
        tenant,
        resource: o.resource ?? mcpUrl,
        ...(o.scope !== undefined ? { scope: o.scope } : {}),
        ...(o.ttl !== undefined ? { ttl: o.ttl } : {}),
      });
    },
    async writes(taskId) {
      const r = await fetch(`${downstreamUrl}/_writes?taskId=${taskId}`);
      return (await r.json()) as never;
    },
    async idpUser(action, sub, tenant) {
      const r = await fetch(`${issuer}/admin/users/${action}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${secrets.idpAdminToken}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ sub, tenant }),
      });
      if (!r.ok) throw new Error(`idp admin ${action}: HTTP ${r.status} ${await r.text()}`);
      return (await r.json()) as IdpUserAnswer;
    },
    async restartGateway() {
      await closeServer(gatewayServer);
      await gateway.close();
      gateway = await buildGateway(parseConfig(gatewayConfigSchema, env), logger, {
        registry: await registryFor(env),
        clock,
      });
      gatewayServer = await listenGateway(gateway, gatewayPort);
    },
    async close() {
      for (const w of workers) await w.stop().catch(() => {});
      await closeServer(gatewayServer);
      await gateway.close();
      await downstream.close();
      await idp.close();
      await rm(dataDir, { recursive: true, force: true });
      await db.drop();
    },
  };
}

/** The registry of an environment: TOOL_PACKS and TOOL_LIMITS, as a process loads them. */
export function registryFor(env: Record<string, string | undefined>): Promise<ToolRegistry> {
  return loadToolRegistry({
    packs: toolPacksFromEnv(env),
    env,
    ...(env.TOOL_LIMITS ? { limits: toolLimitsOverrides.parse(env.TOOL_LIMITS) } : {}),
  });
}
