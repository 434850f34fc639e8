import http from 'node:http';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRemoteJWKSet } from 'jose';
import { createApp as createDownstreamApp } from '../../apps/downstream/src/create-app.ts';
import { createPool, ROLES, type Pool } from '@mtg/db';
import { createLogger } from '@mtg/log';
import { freePort, type Stack } from './stack.ts';

/**
 * Further downstream targets for a stack: each a real instance of apps/downstream that accepts
 * only tokens for its own audience (its URL). Ports are chosen first, so the TARGETS_FILE can
 * be handed to startStack (the IdP learns the audiences from it); `start` then serves them.
 */
export async function planTargets(names: string[]) {
  const ports = await Promise.all(names.map(() => freePort()));
  const urls = Object.fromEntries(names.map((n, i) => [n, `http://127.0.0.1:${ports[i]}`]));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-targets-'));
  const file = path.join(dir, 'targets.yaml');
  await writeFile(file, `targets:\n${names.map((n) => `  ${n}:\n    url: ${urls[n]}\n`).join('')}`);
  const servers: http.Server[] = [];
  let pool: Pool | undefined;
  return {
    file,
    urls,
    async start(stack: Stack) {
      pool = createPool({ connectionString: stack.db.url, role: ROLES.downstream });
      for (const [i, name] of names.entries()) {
        const app = createDownstreamApp({
          pool,
          logger: createLogger(`target-${name}`, { silent: !process.env.TEST_LOGS }),
          auth: {
            keys: createRemoteJWKSet(new URL(`${stack.issuer}/jwks`)),
            issuer: stack.issuer,
            audience: urls[name]!,
          },
        });
        const server = http.createServer(app);
        await new Promise<void>((r) => server.listen(ports[i], '127.0.0.1', () => r()));
        servers.push(server);
      }
    },
    async close() {
      for (const s of servers) {
        await new Promise<void>((r) => {
          s.close(() => r());
          s.closeAllConnections();
        });
      }
      await pool?.end();
    },
  };
}
