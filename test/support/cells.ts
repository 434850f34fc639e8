import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'winston';
import { buildGateway, gatewayConfigSchema } from '@mtg/app-gateway';
import { buildWorker, workerConfigSchema, type Worker } from '@mtg/app-worker';
import { startIdp } from '@mtg/app-idp';
import { packResources } from '../../apps/idp/src/pack-resources.ts';
import { buildCellRouter, cellRouterConfigSchema, loadCells } from '@mtg/app-cell-router';
import { parseConfig } from '@mtg/config';
import { ROLES } from '@mtg/db';
import { installQueue } from '@mtg/tasks';
import { loadTargets, type ToolRegistry } from '@mtg/tools';
import { devUserToken } from '../../apps/cli/src/lib/dev-user-token.ts';
import { generateDevSecrets } from '@mtg/dev-secrets';
import { createTestDatabase, type TestDatabase } from './database.ts';
import {
  closeServer,
  freePort,
  listen,
  registryFor,
  startTestDownstream,
  type IdpUserAnswer,
} from './stack.ts';

/**
 * Cells on this machine (docs/scaling.md, "Past one primary"): each a gateway and a worker
 * over a database of its own, on the PostgreSQL server it is given (one cluster per cell);
 * shared by all, as in production, the dev IdP, the downstream system (with a database of
 * its own) and the edge router in front, whose URL is the one resource every cell serves.
 */
export interface CellsDeployment {
  issuer: string;
  /** The router's MCP endpoint: the only URL clients are given. */
  mcpUrl: string;
  routerUrl: string;
  cells: Record<string, Cell>;
  token(
    sub: string,
    tenant: string,
    options?: { scope?: string; resource?: string },
  ): Promise<string>;
  idpUser(action: 'disable' | 'enable', sub: string, tenant: string): Promise<IdpUserAnswer>;
  close(): Promise<void>;
}

export interface Cell {
  name: string;
  db: TestDatabase;
  /** The cell's gateway, direct (what the router forwards to). */
  url: string;
  worker: Worker;
}

export async function startCells(options: {
  /** Cell name → the superuser URL of the PostgreSQL server its database goes on. */
  servers: Record<string, string>;
  /** Tenant → cell name (the cells file); no default unless given. */
  tenants: Record<string, string>;
  default?: string;
  env?: Record<string, string>;
  logger: Logger;
  /** What the router logs to (default: `logger`). */
  routerLogger?: Logger;
}): Promise<CellsDeployment> {
  const { logger } = options;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-stack-cells-'));
  const secrets = generateDevSecrets();
  const baseEnv: Record<string, string> = { DEMO_STEP_MS: '200', ...options.env };
  const registry: ToolRegistry = await registryFor(baseEnv);
  const routerPort = await freePort();
  const routerUrl = `http://127.0.0.1:${routerPort}`;
  const mcpUrl = `${routerUrl}/mcp`;

  // The downstream enterprise system: one for all cells, its own database.
  const downstreamDb = await createTestDatabase();
  const downstreamPort = await freePort();
  const downstreamUrl = `http://127.0.0.1:${downstreamPort}`;
  const targets = loadTargets({ downstreamUrl, downstreamResource: downstreamUrl });

  // One IdP: tokens for the router's resource; its Shared Signals pushes go to the router.
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
    },
    accessTokenTtl: 3600,
    ssfPush: { url: `${routerUrl}/ssf/events` },
    logger,
  });
  const issuer = idp.idp.issuer;

  const downstream = await startTestDownstream({
    loginUrl: downstreamDb.logins.downstream,
    issuer,
    url: downstreamUrl,
    port: downstreamPort,
    logger,
  });

  const cells: Record<string, Cell> = {};
  const stops: Array<() => Promise<void>> = [];
  for (const [name, adminUrl] of Object.entries(options.servers)) {
    const db = await createTestDatabase({ adminUrl });
    await installQueue(db.url, [ROLES.gateway, ROLES.worker], registry.queues().values());
    const port = await freePort();
    const env: Record<string, string> = {
      DATABASE_URL: db.logins.gateway,
      GATEWAY_PORT: String(port),
      // Every cell is the one resource clients see: the router's.
      GATEWAY_RESOURCE: mcpUrl,
      AUTH_ISSUER: issuer,
      CLIENT_SECRET: secrets.clientSecrets['mcp-gateway'],
      // Each cell encrypts its delegations with a key of its own.
      CREDENTIAL_KEY: generateDevSecrets().credentialKey,
      DOWNSTREAM_URL: downstreamUrl,
      WORKER_LEASE_MS: '2000',
      ...baseEnv,
    };
    const gateway = await buildGateway(parseConfig(gatewayConfigSchema, env), logger, {
      registry,
    });
    const server = await listen(gateway.app, port);
    const worker = await buildWorker(
      parseConfig(workerConfigSchema, {
        ...env,
        DATABASE_URL: db.logins.worker,
        CLIENT_ID: 'mcp-worker',
        CLIENT_SECRET: secrets.clientSecrets['mcp-worker'],
        WORKER_ID: `cell-${name}-worker-1`,
      }),
      registry,
      logger,
    );
    await worker.start();
    cells[name] = { name, db, url: `http://127.0.0.1:${port}`, worker };
    stops.push(async () => {
      await worker.stop().catch(() => {});
      await closeServer(server);
      await gateway.close();
      await db.drop();
    });
  }

  const cellsFile = path.join(dataDir, 'cells.yaml');
  await writeFile(
    cellsFile,
    JSON.stringify({
      cells: Object.fromEntries(Object.values(cells).map((c) => [c.name, { url: c.url }])),
      tenants: options.tenants,
      ...(options.default ? { default: options.default } : {}),
    }),
  );
  const routerConfig = parseConfig(cellRouterConfigSchema, {
    CELL_ROUTER_PORT: String(routerPort),
    CELLS_FILE: cellsFile,
    AUTH_ISSUER: issuer,
  });
  const router = await buildCellRouter(
    routerConfig,
    loadCells(cellsFile),
    options.routerLogger ?? logger,
  );
  const routerServer = await listen(router.app, routerPort);

  return {
    issuer,
    mcpUrl,
    routerUrl,
    cells,
    token: (sub, tenant, o = {}) =>
      devUserToken({
        issuer,
        client: 'mcp-agent',
        clientSecret: secrets.clientSecrets['mcp-agent'],
        sub,
        tenant,
        resource: o.resource ?? mcpUrl,
        ...(o.scope !== undefined ? { scope: o.scope } : {}),
      }),
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
    async close() {
      await closeServer(routerServer);
      await router.close();
      for (const stop of stops) await stop();
      await downstream.close();
      await idp.close();
      await downstreamDb.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
