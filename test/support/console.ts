import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JSONWebKeySet } from 'jose';
import { createConsole } from '../../apps/console/src/index.ts';
import {
  createPool,
  dropLoginRoles,
  loginUrl,
  provisionLoginRoles,
  ROLES,
} from '../../packages/db/src/index.ts';
import { createLogger } from '../../packages/log/src/index.ts';
import { adminDatabaseUrl } from './database.ts';
import type { Stack } from './stack.ts';

export interface TestConsole {
  url: string;
  /** The console's own database login, a member of mtg_auditor only. */
  databaseUrl: string;
  close(): Promise<void>;
}

/**
 * The console in this process, in front of a test stack: its own LOGIN role (member of
 * mtg_auditor only), the stack's dev IdP and gateway, the checkpoint keys in `jwksFile`.
 */
export async function startConsole(stack: Stack, options: { jwksFile?: string } = {}) {
  const login = {
    name: `${stack.db.name}_console`,
    password: randomBytes(18).toString('base64url'),
    group: ROLES.auditor,
  };
  await provisionLoginRoles(stack.db.url, [login]);
  const databaseUrl = loginUrl(stack.db.url, login);
  const pool = createPool({ connectionString: databaseUrl, role: ROLES.auditor, max: 4 });
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { app } = createConsole({
    pool,
    logger: createLogger('console', { silent: !process.env.TEST_LOGS }),
    baseUrl: url,
    issuer: stack.issuer,
    clientId: 'mcp-console',
    gatewayResource: stack.mcpUrl,
    checkpointKeys: async () =>
      options.jwksFile
        ? (JSON.parse(await readFile(options.jwksFile, 'utf8')) as JSONWebKeySet)
        : undefined,
  });
  server.on('request', app);
  return {
    url,
    databaseUrl,
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      await pool.end();
      await dropLoginRoles(adminDatabaseUrl(), [login.name]);
    },
  } satisfies TestConsole;
}
