import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  DEFAULT_EMBEDDED_PORT,
  startEmbeddedPostgres,
  type EmbeddedPostgres,
  type EmbeddedPostgresLogger,
} from '../src/index.ts';

// Real clusters under the repository's .data (as root, the `postgres` OS user must be able
// to reach the directory, which a private mkdtemp directory would not allow). One cluster
// is initialised once and restarted by the tests below, which run in order.
const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const dataDir = path.join(repoRoot, '.data', `test-embedded-${process.pid}`);
const fixture = fileURLToPath(new URL('./fixtures/hold-embedded-postgres.ts', import.meta.url));

const running: EmbeddedPostgres[] = [];
const servers: net.Server[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function recordingLogger() {
  const lines: { level: string; message: string; meta?: Record<string, unknown> }[] = [];
  const at = (level: string) => (message: string, meta?: Record<string, unknown>) =>
    lines.push({ level, message, meta });
  const logger: EmbeddedPostgresLogger = {
    debug: () => {},
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
  };
  return { logger, lines };
}

async function start(
  options: { port?: number; preferredPort?: number; logger?: EmbeddedPostgresLogger } = {},
) {
  const postgres = await startEmbeddedPostgres({ dataDir, ...options });
  running.push(postgres);
  return postgres;
}

async function selectOne(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one;
  } finally {
    await client.end();
  }
}

/** Occupies a loopback port unless something already listens there. */
async function occupy(port: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve()); // already taken: fine
    server.listen({ port, host: '127.0.0.1' }, () => {
      servers.push(server);
      resolve();
    });
  });
}

/** Listens on a free loopback port until the test ends; returns it. */
async function occupyAnyPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen({ port: 0, host: '127.0.0.1' }, () => {
      servers.push(server);
      resolve((server.address() as net.AddressInfo).port);
    });
  });
}

function isAlive(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('starts on a free port while 5432 and the preferred port are taken', async () => {
  await occupy(5432); // usually the machine's own PostgreSQL already
  const preferred = await occupyAnyPort();

  const postgres = await start({ preferredPort: preferred });

  expect([5432, preferred]).not.toContain(postgres.port);
  expect(postgres.url).toContain(`@127.0.0.1:${postgres.port}/postgres`);
  expect(await selectOne(postgres.url)).toBe(1);
});

test('uses the preferred port when it is free', async () => {
  const preferred = await occupyAnyPort();
  await new Promise((resolve) => servers.pop()!.close(resolve));

  const postgres = await start({ preferredPort: preferred });

  expect(postgres.port).toBe(preferred);
});

test('reuses the initialised cluster and keeps its data across restarts', async () => {
  let postgres = await start();
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  await client.query('CREATE TABLE IF NOT EXISTS kept (v text)');
  await client.query("INSERT INTO kept VALUES ('x')");
  await client.end();
  await postgres.stop();

  postgres = await start();
  const again = new pg.Client({ connectionString: postgres.url });
  await again.connect();
  expect((await again.query('SELECT count(*)::int AS n FROM kept')).rows[0].n).toBeGreaterThan(0);
  await again.end();
});

test('a fixed port that is taken is reported, naming the port and the variable', async () => {
  const taken = await occupyAnyPort();
  await expect(start({ port: taken })).rejects.toMatchObject({
    code: 'port_in_use',
    message: expect.stringMatching(new RegExp(`port ${taken}.*EMBEDDED_PG_PORT`)),
  });
});

test('refuses a second start on a data directory whose server is still in use', async () => {
  const first = await start();
  await expect(startEmbeddedPostgres({ dataDir })).rejects.toMatchObject({
    code: 'cluster_in_use',
    message: expect.stringContaining(`in use by process ${process.pid}`),
  });
  expect(await selectOne(first.url)).toBe(1);
});

test('recovers after its owner was SIGKILLed and left the server running', async () => {
  const owner: ChildProcess = spawn(process.execPath, [fixture, dataDir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const orphan = await new Promise<{ pid: number; port: number }>((resolve, reject) => {
    owner.stdout!.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
    owner.once('exit', (code) => reject(new Error(`fixture exited with ${code}`)));
  });
  // While its owner lives, the cluster is not taken from it.
  await expect(startEmbeddedPostgres({ dataDir })).rejects.toMatchObject({
    code: 'cluster_in_use',
    message: expect.stringContaining(`in use by process ${owner.pid}`),
  });
  expect(isAlive(orphan.pid)).toBe(true);

  owner.kill('SIGKILL');
  await new Promise((resolve) => owner.once('exit', resolve));
  expect(isAlive(orphan.pid)).toBe(true); // the crash left the server behind

  const { logger, lines } = recordingLogger();
  const postgres = await start({ logger });

  expect(isAlive(orphan.pid)).toBe(false);
  expect(lines).toContainEqual(
    expect.objectContaining({ level: 'warn', message: expect.stringMatching(/orphaned/) }),
  );
  expect(postgres.pid).not.toBe(orphan.pid);
  expect(await selectOne(postgres.url)).toBe(1);
});

test('removes a stale postmaster.pid whose process is gone', async () => {
  const dead = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => dead.once('exit', resolve));
  const pidFile = path.join(dataDir, 'postmaster.pid');
  // The layout PostgreSQL writes: pid, data dir, start time, port, socket dir, host, shmem.
  await writeFile(
    pidFile,
    `${dead.pid}\n${dataDir}\n1700000000\n${DEFAULT_EMBEDDED_PORT}\n\n127.0.0.1\n  54329001         0\nready   \n`,
  );

  const { logger, lines } = recordingLogger();
  const postgres = await start({ logger });

  expect(lines).toContainEqual(
    expect.objectContaining({ level: 'warn', message: 'removed stale postmaster.pid' }),
  );
  expect((await readFile(pidFile, 'utf8')).split('\n')[0]).toBe(String(postgres.pid));
  expect(await selectOne(postgres.url)).toBe(1);
});

test('stop() shuts the server down, and the exit is reported as requested', async () => {
  const postgres = await start();
  await postgres.stop();
  expect(await postgres.exited).toMatchObject({ requested: true });
  expect(isAlive(postgres.pid)).toBe(false);
  await postgres.stop(); // idempotent
});
