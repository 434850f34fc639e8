import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JSONWebKeySet } from 'jose';
import { createConsole } from '@mtg/app-console';
import { createPool, dropLoginRoles, loginUrl, provisionLoginRoles, ROLES } from '@mtg/db';
import { createLogger } from '@mtg/log';
import { adminDatabaseUrl } from './database.ts';
import type { Stack } from './stack.ts';

export interface TestConsole {
  url: string;
  /** The console's own database login, a member of mtg_console only. */
  databaseUrl: string;
  /** The key its sessions are sealed with (give it to a second console to share them). */
  sessionKey: Buffer;
  close(): Promise<void>;
}

/**
 * The console in this process, in front of a test stack: its own LOGIN role (member of
 * mtg_console only), the stack's dev IdP and gateway, the checkpoint keys in `jwksFile`.
 * Consoles on one stack given the same `sessionKey` are replicas: one session table, one key
 * (each with a login role of its own, told apart by `name`).
 */
export async function startConsole(
  stack: Stack,
  options: {
    jwksFile?: string;
    metricsEndpoints?: Array<{ name: string; url: string }>;
    sessionKey?: Buffer;
    sessionIdleSeconds?: number;
    /** Suffix of the login role (default "console"). */
    name?: string;
  } = {},
) {
  const login = {
    name: `${stack.db.name}_${options.name ?? 'console'}`,
    password: randomBytes(18).toString('base64url'),
    group: ROLES.console,
  };
  await provisionLoginRoles(stack.db.url, [login]);
  const databaseUrl = loginUrl(stack.db.url, login);
  const pool = createPool({ connectionString: databaseUrl, role: ROLES.console, max: 4 });
  const sessionKey = options.sessionKey ?? randomBytes(32);
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
    approvalScopes: ['records:approve'],
    sessionKeys: { keys: { k1: sessionKey }, current: 'k1' },
    ...(options.sessionIdleSeconds ? { sessionIdleSeconds: options.sessionIdleSeconds } : {}),
    ...(options.metricsEndpoints ? { metricsEndpoints: options.metricsEndpoints } : {}),
    checkpointKeys: async () =>
      options.jwksFile
        ? (JSON.parse(await readFile(options.jwksFile, 'utf8')) as JSONWebKeySet)
        : undefined,
  });
  server.on('request', app);
  return {
    url,
    databaseUrl,
    sessionKey,
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
