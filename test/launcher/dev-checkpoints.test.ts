// Out of the box the stack signs checkpoints on a schedule (as the CronJob does in Kubernetes)
// and the console has their public keys, so a new user's task page says its trail is verified.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { execFile } from 'node:child_process';
import pg from 'pg';
import { recreateDatabase } from '@mtg/db';
import { connectV1 } from '../support/clients.ts';
import { logInOverHttp, send } from '../support/console-http.ts';
import { pollUntil } from '../support/poll.ts';
import { freePort } from '../support/stack.ts';

const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
let stack: ChildProcess | undefined;
let dataDir: string;
const DATABASE = `mtg_dev_checkpoints_${process.pid}`;

afterAll(async () => {
  if (stack && stack.exitCode === null && stack.signalCode === null) {
    const exited = new Promise((resolve) => stack!.once('exit', resolve));
    stack.kill('SIGTERM');
    await exited;
  }
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  // The stack's database, on the shared test server: gone with the test, as every test's is.
  const admin = new pg.Client({ connectionString: process.env.TEST_ADMIN_DATABASE_URL! });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(DATABASE)} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}, 60_000);

test("dev signs checkpoints on its own and the console verifies a task's trail against them", async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mtg-dev-checkpoints-'));
  const databaseUrl = await recreateDatabase(process.env.TEST_ADMIN_DATABASE_URL!, DATABASE);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    WORKERS: '1',
    DEMO_STEP_MS: '20',
    AUDIT_CHECKPOINT_EVERY: '0.5',
    GATEWAY_PORT: String(await freePort()),
    IDP_PORT: String(await freePort()),
    DOWNSTREAM_PORT: String(await freePort()),
    UPSTREAM_DEMO_PORT: String(await freePort()),
    CONSOLE_PORT: String(await freePort()),
  };
  delete env.UPSTREAMS_FILE;
  delete env.TOOL_PACKS;
  stack = fork(CLI, ['dev'], { env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let out = '';
  stack.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  stack.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const ready = await pollUntil(
    async () => /^ready: .*$/m.exec(out)?.[0],
    (line) => line !== undefined || stack!.exitCode !== null,
    90_000,
    200,
    'the ready line',
  );
  expect(ready).toBeDefined();
  const mcp = /mcp=(\S+)/.exec(ready!)![1]!;
  const consoleUrl = /console=(\S+)/.exec(ready!)![1]!;

  const token = (
    await run(process.execPath, [CLI, 'token', '--sub', 'alice', '--tenant', 'acme'], { env })
  ).stdout.trim();
  const client = await connectV1(mcp, token);
  let jobId: string;
  try {
    const started = await client.callTool({
      name: 'generate_report',
      arguments: { report: 'checkpoints', rows: 10 },
    });
    jobId = (started.structuredContent as { jobId: string }).jobId;
  } finally {
    await client.close();
  }

  const { jar } = await logInOverHttp(consoleUrl, 'user', { sub: 'alice', tenant: 'acme' });
  const page = await pollUntil(
    async () => (await send(jar, `${consoleUrl}/tasks/${jobId}`)).text,
    (text) => text.includes('verified up to the checkpoint of'),
    30_000,
    500,
    "the task page to show its trail verified against the stack's own checkpoint",
  );
  expect(page).not.toContain('not checked');
}, 180_000);
