import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '@mtg/dev-postgres';
import type { Logger } from '@mtg/log';
import type { DevSecrets } from '@mtg/dev-secrets';
import { checkDatabase } from './check-database.ts';
import { ChildFailedError, describeExit, startChild, type Child } from './child.ts';
import { childEnv, stackUrls, type Service } from './child-env.ts';
import type { LauncherConfig } from './config.ts';
import { provisionDerivedLogins, type DerivedLogin } from './derived-logins.ts';
import {
  provisionDatabaseLogins,
  STACK_LOGIN_PREFIX,
  type DatabaseUrls,
} from './database-logins.ts';
import { prepareDatabase } from './prepare-database.ts';
import { recordProcesses, stopStaleProcesses } from './stale-processes.ts';
import { chooseUpstreamsFile } from './upstreams-file.ts';

export interface StackOptions {
  config: LauncherConfig;
  secrets: DevSecrets;
  /** Resolved DATA_DIR: the embedded cluster lives in `<dataDir>/postgres`. */
  dataDir: string;
  logger: Logger;
  readyTimeoutMs?: number;
  /** Per shutdown stage: SIGTERM, then SIGKILL after this long. */
  stopGraceMs?: number;
}

export interface StackInfo {
  mcp: string;
  idp: string;
  downstream: string;
  console: string;
  workers: number;
  database: 'embedded' | 'external';
  /** Each Prometheus endpoint by process (`gateway`, `worker-1` …), when workers serve one. */
  metrics: Array<{ process: string; url: string }>;
}

/** Raised by start() when stop() was called while it was still starting. */
export class StackStoppedError extends Error {
  readonly code = 'stack_stopped';
  constructor() {
    super('stopped while starting');
    this.name = 'StackStoppedError';
  }
}

const RESTART_MIN_MS = 1_000;
const RESTART_MAX_MS = 30_000;
/** A worker that ran this long before exiting starts again without accumulated backoff. */
const HEALTHY_UPTIME_MS = 60_000;
/** Lets a stop already under way (a signal) win over reading an exit as a crash. */
const EXIT_GRACE_MS = 250;

/**
 * The local stack: database, dev IdP, demo downstream, gateway and workers, started in
 * dependency order and stopped in reverse. After start(): a worker that exits is restarted
 * with backoff; any other process exiting stops the whole stack with status 1.
 */
export function createStack(options: StackOptions) {
  const { config, logger } = options;
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const urls = stackUrls(config);

  let phase: 'idle' | 'starting' | 'running' | 'stopping' = 'idle';
  const tiers: Record<Service, Set<Child>> = {
    idp: new Set(),
    downstream: new Set(),
    'upstream-demo': new Set(),
    gateway: new Set(),
    worker: new Set(),
    console: new Set(),
  };
  const restartTimers = new Set<NodeJS.Timeout>();
  /** Signs the audit chains' checkpoints on a schedule (not a service: nothing waits on it). */
  let checkpoints: Child | undefined;
  const processes = recordProcesses(options.dataDir);
  let database: EmbeddedPostgres | undefined;
  // stop() waits for a start in progress, so that it can shut down what that start brings up.
  let databaseStarting: Promise<EmbeddedPostgres | undefined> = Promise.resolve(undefined);
  let databaseUrl = '';
  let databaseUrls: DatabaseUrls | undefined;
  let upstreamsFile: string | undefined;
  let derivedUrls: Record<DerivedLogin, string> | undefined;
  let stopping: Promise<number> | undefined;
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((resolve) => (resolveDone = resolve));

  // Anything that breaks while starting (a child or the database exiting, stop()) rejects
  // this, and every step of start() races against it.
  let abortStart!: (error: Error) => void;
  const aborted = new Promise<never>((_, reject) => (abortStart = reject));
  aborted.catch(() => {});
  const step = <T>(promise: Promise<T>) => Promise.race([promise, aborted]);

  // Each app's entry point as its package exports it: its sources here, dist when installed.
  const moduleOf = (service: Service) =>
    fileURLToPath(import.meta.resolve(`@mtg/app-${service}/main`));

  /** Starts `service`; workers by number (worker N is `worker-N`, also after a restart). */
  function launch(service: Service, workerIndex?: number): Child {
    const workerId = workerIndex === undefined ? undefined : `worker-${workerIndex}`;
    const name = workerId ?? service;
    const env = childEnv(service, {
      // The UPSTREAMS_FILE start() chose (the operator's, or the demo upstream's).
      ...(upstreamsFile ? { base: { ...process.env, UPSTREAMS_FILE: upstreamsFile } } : {}),
      config,
      databaseUrls: databaseUrls!,
      ...(derivedUrls ? { consoleDatabaseUrl: derivedUrls.console } : {}),
      secrets: options.secrets,
      dataDir: options.dataDir,
      workerId,
      workerIndex,
    });
    const module = moduleOf(service);
    const child = startChild(name, module, env, { readyTimeoutMs });
    const startedAt = performance.now();
    tiers[service].add(child);
    processes.started(child.pid, module);
    void child.exited.then(async (exit) => {
      tiers[service].delete(child);
      processes.exited(child.pid);
      if (phase === 'stopping') return;
      await new Promise((r) => setTimeout(r, EXIT_GRACE_MS));
      if (phase === 'starting') {
        abortStart(
          new ChildFailedError(
            name,
            `${describeExit(exit)} while the stack was starting`,
            child.stderrTail(),
          ),
        );
      } else if (phase === 'running') {
        if (service === 'worker')
          scheduleRestart(workerIndex!, performance.now() - startedAt, exit);
        else {
          logger.error('process exited unexpectedly; stopping the stack', {
            process: name,
            code: exit.code,
            signal: exit.signal,
            stderr: child.stderrTail().slice(-5),
          });
          void stop(1);
        }
      }
    });
    return child;
  }

  const failures = new Map<string, number>();
  function scheduleRestart(
    workerIndex: number,
    uptimeMs: number,
    exit: { code: number | null; signal: string | null },
  ) {
    const workerId = `worker-${workerIndex}`;
    const count = uptimeMs >= HEALTHY_UPTIME_MS ? 0 : (failures.get(workerId) ?? 0);
    failures.set(workerId, count + 1);
    const delayMs = Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** count);
    logger.warn('worker exited unexpectedly; restarting', {
      worker: workerId,
      code: exit.code,
      signal: exit.signal,
      uptimeMs,
      delayMs,
      restarts: count + 1,
    });
    const timer = setTimeout(() => {
      restartTimers.delete(timer);
      if (phase !== 'running') return;
      const child = launch('worker', workerIndex);
      child.ready.then(
        () => logger.info('worker restarted', { worker: workerId, pid: child.pid }),
        () => {}, // its exit is handled like any other
      );
    }, delayMs);
    restartTimers.add(timer);
  }

  async function start(): Promise<StackInfo> {
    if (phase !== 'idle') throw new Error('start() called twice');
    phase = 'starting';

    await step(stopStaleProcesses(options.dataDir, logger));
    if (config.DATABASE_URL) {
      await step(checkDatabase(config.DATABASE_URL));
      databaseUrl = config.DATABASE_URL;
    } else {
      const started = startEmbeddedPostgres({
        dataDir: path.join(options.dataDir, 'postgres'),
        port: config.EMBEDDED_PG_PORT,
        logger: logger.child({ component: 'embedded-postgres' }),
      });
      databaseStarting = started.then(
        (db) => {
          database = db;
          void db.exited.then((exit) => {
            if (exit.requested || phase === 'stopping') return;
            const error = new Error(
              `embedded PostgreSQL ${describeExit(exit)} (see its log lines above)`,
            );
            if (phase === 'starting') abortStart(error);
            else {
              logger.error('embedded postgres exited unexpectedly; stopping the stack');
              void stop(1);
            }
          });
          return db;
        },
        () => undefined,
      );
      databaseUrl = (await step(started)).url;
    }
    // The demo upstream is registered (UPSTREAMS_FILE) unless the operator brings their own.
    upstreamsFile = await chooseUpstreamsFile({
      env: process.env,
      dataDir: options.dataDir,
      config,
      logger,
    });
    await step(
      prepareDatabase(databaseUrl, logger, { ...process.env, UPSTREAMS_FILE: upstreamsFile }),
    );
    // The owner URL stops here: every process gets a login of its own.
    databaseUrls = await step(
      provisionDatabaseLogins(databaseUrl, STACK_LOGIN_PREFIX, options.secrets.databasePasswords),
    );
    derivedUrls = await step(
      provisionDerivedLogins(databaseUrl, STACK_LOGIN_PREFIX, options.secrets),
    );

    await step(launch('idp').ready);
    await step(launch('downstream').ready);
    // Before the gateway: it lists the upstream's tools when it starts.
    await step(launch('upstream-demo').ready);
    const rest = [launch('gateway')];
    for (let n = 1; n <= config.WORKERS; n++) rest.push(launch('worker', n));
    const ready = await step(Promise.all(rest.map((c) => c.ready)));
    await step(launch('console').ready);
    if (config.AUDIT_CHECKPOINT_EVERY > 0) {
      signCheckpoints(config.AUDIT_CHECKPOINT_EVERY, derivedUrls.checkpoints);
    }
    // A worker's ready message carries its metrics endpoint, when it serves one.
    const workerMetrics = rest.slice(1).flatMap((child, i) => {
      const url = ready[i + 1]?.url;
      return url ? [{ process: child.name, url }] : [];
    });

    phase = 'running';
    return {
      mcp: urls.mcp,
      idp: urls.idp,
      downstream: urls.downstream,
      console: urls.console,
      workers: config.WORKERS,
      database: database ? 'embedded' : 'external',
      metrics: workerMetrics.length
        ? [{ process: 'gateway', url: new URL('/metrics', urls.mcp).href }, ...workerMetrics]
        : [],
    };
  }

  /**
   * `audit checkpoint --every`: the first checkpoint at once, then whenever a chain head moved,
   * so the console shows a verified trail out of the box. Its exit is logged, never fatal: a
   * broken chain is the auditors' alarm, not a reason to stop the stack.
   */
  function signCheckpoints(everySeconds: number, databaseUrl: string): void {
    const module = fileURLToPath(
      new URL(`../commands/audit-checkpoint${path.extname(import.meta.filename)}`, import.meta.url),
    );
    // Its own login (mtg_login_checkpoints, in mtg_audit_signer only), never the owner's URL.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATA_DIR: options.dataDir,
      DATABASE_URL: databaseUrl,
    };
    delete env.DATABASE_ROLE; // the command's default, mtg_audit_signer
    const child = startChild('checkpoints', module, env, {
      readyTimeoutMs,
      args: ['--every', String(everySeconds)],
    });
    child.ready.catch(() => {});
    checkpoints = child;
    processes.started(child.pid, module);
    void child.exited.then((exit) => {
      processes.exited(child.pid);
      if (phase !== 'stopping') {
        logger.warn('the checkpoint signer exited; no further checkpoints until a restart', {
          exit: describeExit(exit),
        });
      }
    });
  }

  /** Stops everything in reverse start order, then settles `done` with `code`. Idempotent. */
  function stop(code: number): Promise<number> {
    stopping ??= (async () => {
      phase = 'stopping';
      abortStart(new StackStoppedError());
      for (const timer of restartTimers) clearTimeout(timer);
      await checkpoints?.terminate(stopGraceMs);
      // Workers may still be finishing jobs that call the IdP and the downstream system.
      for (const tier of [
        ['console', 'gateway', 'worker'],
        ['downstream', 'upstream-demo'],
        ['idp'],
      ] as Service[][]) {
        const children = tier.flatMap((s) => [...tiers[s]]);
        await Promise.all(
          children.map(async (child) => {
            const exit = await child.terminate(stopGraceMs);
            if (exit.signal === 'SIGKILL') {
              logger.warn('process did not stop in time; killed', { process: child.name });
            }
          }),
        );
      }
      const db = await databaseStarting;
      if (db) {
        await db.stop().catch((error: unknown) => {
          logger.error('could not stop embedded postgres', { error });
          code ||= 1;
        });
      }
      processes.clear();
      resolveDone(code);
      return code;
    })();
    return stopping;
  }

  /** A second Ctrl-C: kill everything now. */
  function force(): void {
    phase = 'stopping';
    for (const timer of restartTimers) clearTimeout(timer);
    for (const tier of Object.values(tiers)) for (const child of tier) child.kill();
    checkpoints?.kill();
    // Immediate shutdown: no checkpoint, crash recovery at the next start.
    if (database) {
      try {
        process.kill(database.pid, 'SIGQUIT');
      } catch {
        // already gone
      }
    }
  }

  /** For process.on('exit'): do not leave children behind if the launcher dies abruptly. */
  function killAllSync(): void {
    for (const tier of Object.values(tiers)) for (const child of tier) child.kill('SIGTERM');
    checkpoints?.kill('SIGTERM');
  }

  return { start, stop, force, killAllSync, done };
}
