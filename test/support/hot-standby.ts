import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { access, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './stack.ts';

/**
 * Real PostgreSQL servers for the read-replica tests: a hot standby made with `pg_basebackup
 * -R -X stream` and started on a port of its own, streaming from its primary. The primary is
 * the test cluster itself when it accepts replication connections from 127.0.0.1 (and its
 * major version is that of the local server binaries); otherwise a throw-away primary this
 * module creates with initdb (its own pg_hba.conf allows replication), so the test never has
 * to edit the system's configuration. Needs the server binaries (`pg_config --bindir`); as
 * root, an OS user `postgres` to run them as (PostgreSQL refuses to run as root).
 */

const run = promisify(execFile);

export interface PgServer {
  port: number;
  dir: string;
  /** Superuser URL of its `postgres` database (trust on loopback). */
  url: string;
  stop(): Promise<void>;
}

interface Tools {
  bin: string;
  major: number;
  /** The OS user to run servers as (root only). */
  runAs?: { uid: number; gid: number };
}

/** The binaries and OS user, or why there are none (the test then skips, saying so). */
export async function standbyTools(): Promise<Tools | { missing: string }> {
  let bin: string;
  try {
    bin = (await run('pg_config', ['--bindir'])).stdout.trim();
  } catch {
    return { missing: 'pg_config is not on PATH (the PostgreSQL server binaries are needed)' };
  }
  for (const name of ['initdb', 'postgres', 'pg_basebackup', 'psql']) {
    try {
      await access(path.join(bin, name));
    } catch {
      return { missing: `${path.join(bin, name)} does not exist` };
    }
  }
  const version = (await run(path.join(bin, 'postgres'), ['--version'])).stdout;
  const major = Number(/(\d+)(?:\.\d+)?/.exec(version)?.[1]);
  if (process.getuid?.() !== 0) return { bin, major };
  try {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    return { bin, major, runAs: { uid, gid } };
  } catch {
    return { missing: 'running as root, and there is no OS user "postgres" to run a server as' };
  }
}

/**
 * Why the server at `adminUrl` cannot be the standby's primary (another major version than
 * the local binaries, or no pg_hba.conf `replication` entry for us), or undefined if it can.
 */
export async function whyNotReplicable(
  tools: Tools,
  adminUrl: string,
): Promise<string | undefined> {
  const u = new URL(adminUrl);
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const v = await client.query<{ v: string }>(
      "SELECT current_setting('server_version_num') AS v",
    );
    const major = Math.floor(Number(v.rows[0]!.v) / 10_000);
    if (major !== tools.major)
      return `it is PostgreSQL ${major}, the local server binaries are ${tools.major}`;
  } finally {
    await client.end();
  }
  const conninfo = `host=${u.hostname} port=${u.port || 5432} user=${decodeURIComponent(u.username || 'postgres')} dbname=postgres replication=true`;
  try {
    await run(path.join(tools.bin, 'psql'), ['-d', conninfo, '-Atc', 'IDENTIFY_SYSTEM'], {
      env: { ...process.env, PGPASSWORD: decodeURIComponent(u.password) },
    });
    return undefined;
  } catch {
    return 'it refuses replication connections from 127.0.0.1 (no pg_hba.conf `replication` entry)';
  }
}

/** A directory the server's OS user owns. */
async function serverDir(tools: Tools, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  if (tools.runAs) await chown(dir, tools.runAs.uid, tools.runAs.gid);
  return dir;
}

function runAsServer(tools: Tools, cmd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  return run(path.join(tools.bin, cmd), args, {
    env: { ...process.env, ...env },
    ...(tools.runAs ? { uid: tools.runAs.uid, gid: tools.runAs.gid } : {}),
  });
}

/** A new, empty primary (initdb, trust on loopback, replication allowed), started. */
export async function startOwnPrimary(tools: Tools): Promise<PgServer> {
  const root = await serverDir(tools, 'mtg-primary-');
  const dir = path.join(root, 'data');
  await runAsServer(tools, 'initdb', [
    '-D',
    dir,
    '-U',
    'postgres',
    '--auth=trust',
    '-N',
    '-E',
    'UTF8',
  ]);
  return startServer(tools, root, dir, {});
}

/** pg_basebackup of the server at `primaryUrl`, started as a hot standby streaming from it. */
export async function startHotStandby(tools: Tools, primaryUrl: string): Promise<PgServer> {
  const u = new URL(primaryUrl);
  const root = await serverDir(tools, 'mtg-standby-');
  const dir = path.join(root, 'data');
  try {
    await runAsServer(
      tools,
      'pg_basebackup',
      [
        '-h',
        u.hostname,
        '-p',
        u.port || '5432',
        '-U',
        decodeURIComponent(u.username || 'postgres'),
      ].concat(['-D', dir, '-R', '-X', 'stream', '--no-sync', '--checkpoint=fast']),
      { PGPASSWORD: decodeURIComponent(u.password) },
    );
  } catch (error) {
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  // A packaged cluster keeps its configuration outside the data directory (/etc/postgresql):
  // the copy then has none, so give it its own (only loopback, trust).
  for (const [file, text] of [
    ['postgresql.conf', ''],
    ['pg_hba.conf', 'local all all trust\nhost all all 127.0.0.1/32 trust\n'],
    ['pg_ident.conf', ''],
  ] as const) {
    const target = path.join(dir, file);
    const exists = await access(target).then(
      () => true,
      () => false,
    );
    if (!exists) {
      await writeFile(target, text);
      if (tools.runAs) await chown(target, tools.runAs.uid, tools.runAs.gid);
    }
  }
  return startServer(tools, root, dir, {
    ...(await standbyMinimums(primaryUrl)),
    hot_standby: 'on',
  });
}

// A hot standby refuses to start with less of these than its primary has.
const AT_LEAST_THE_PRIMARYS = [
  'max_connections',
  'max_worker_processes',
  'max_wal_senders',
  'max_prepared_transactions',
  'max_locks_per_transaction',
];

async function standbyMinimums(primaryUrl: string): Promise<Record<string, string>> {
  const client = new pg.Client({ connectionString: primaryUrl });
  await client.connect();
  try {
    const r = await client.query<{ name: string; setting: string }>(
      'SELECT name, setting FROM pg_settings WHERE name = ANY ($1)',
      [AT_LEAST_THE_PRIMARYS],
    );
    return Object.fromEntries(r.rows.map((row) => [row.name, row.setting]));
  } finally {
    await client.end();
  }
}

async function startServer(
  tools: Tools,
  root: string,
  dir: string,
  settings: Record<string, string>,
): Promise<PgServer> {
  const port = await freePort();
  const all: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: root,
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    shared_buffers: '16MB',
    max_connections: '60',
    // The settings a packaged cluster keeps in /etc, which a copy of it lacks.
    ...settings,
  };
  const args = ['-D', dir, '-p', String(port)];
  for (const [k, v] of Object.entries(all)) args.push('-c', `${k}=${v}`);
  const child: ChildProcess = spawn(path.join(tools.bin, 'postgres'), args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(tools.runAs ? { uid: tools.runAs.uid, gid: tools.runAs.gid } : {}),
  });
  let log = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const until = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) {
      await rm(root, { recursive: true, force: true });
      throw new Error(`postgres exited at start:\n${log}`);
    }
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => {});
    const ok = await c
      .connect()
      .then(() => c.query('SELECT 1'))
      .then(
        () => true,
        () => false,
      );
    await c.end().catch(() => {});
    if (ok) break;
    if (Date.now() > until) {
      child.kill('SIGQUIT');
      await exited;
      await rm(root, { recursive: true, force: true });
      throw new Error(`postgres not ready after 60 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  let stopped: Promise<void> | undefined;
  return {
    port,
    dir,
    url,
    stop: () =>
      (stopped ??= (async () => {
        if (child.exitCode === null) {
          child.kill('SIGINT'); // fast shutdown
          const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
          await exited;
          clearTimeout(timer);
        }
        await rm(root, { recursive: true, force: true });
      })()),
  };
}

/** The same URL on another port (a login of the primary, on its standby). */
export function onPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}
