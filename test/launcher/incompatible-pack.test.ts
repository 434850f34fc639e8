// `npm start` refuses a pack built for a tool kit it does not serve, as the apps do: exit 2,
// naming both versions. The registry is read before the database is touched.
import { fork } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { freePort } from '../support/stack.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await db?.drop();
});

test('npm start with a pack built for another tool kit exits 2 naming both versions', async () => {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const launcher = fork(path.join(root, 'scripts/start.ts'), [], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'mtg-launcher-kit-')),
      // An empty database of its own: the refusal comes before anything is migrated.
      DATABASE_URL: db.url,
      GATEWAY_PORT: String(await freePort()),
      IDP_PORT: String(await freePort()),
      DOWNSTREAM_PORT: String(await freePort()),
      // Every port the launcher listens on, not its defaults: a busy machine (or a second
      // run) may hold 9600 or 9700.
      UPSTREAM_DEMO_PORT: String(await freePort()),
      CONSOLE_PORT: String(await freePort()),
      WORKERS: '1',
      LOG_LEVEL: 'warn',
      TOOL_PACKS: '@mtg/demo-tools,./test/fixtures/packs/kit-future',
    },
    execArgv: [],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  launcher.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  launcher.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve) =>
    launcher.once('exit', (c) => resolve(c)),
  );
  expect(output).toMatch(
    /pack @fixture\/kit-future needs @mtg\/tool-kit \^9\.0\.0; this gateway serves \S+ \(\S+\)/,
  );
  expect(code).toBe(2);
  expect(output).not.toContain('database migrated');
});
