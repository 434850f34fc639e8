// The product as real processes, for benchmarks and chaos tests: the dev IdP, the demo
// downstream, N gateway replicas and M workers, each forked from its apps/*/src/main.ts with
// the environment the launcher would give it (apps/cli/src/launcher/child-env.ts). Unlike
// `npm start`, every process can be killed, stopped and started again on its own, and the
// caller owns the database (it is never started here).
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { childEnv, type Service } from '../../../apps/cli/src/launcher/child-env.ts';
import type { LauncherConfig } from '../../../apps/cli/src/launcher/config.ts';
import type { DatabaseUrls } from '../../../apps/cli/src/launcher/database-logins.ts';
import { generateDevSecrets, type DevSecrets } from '@mtg/dev-secrets';
import { devUserToken } from '../../../apps/cli/src/lib/dev-user-token.ts';
import { freePort } from '../../../test/support/free-port.ts';

export { freePort };

export const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url));

export interface ProcExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One forked process of the stack. */
export interface Proc {
  name: string;
  service: Service;
  pid: number;
  child: ChildProcess;
  /** The `{ type: 'ready' }` IPC message arrived; rejects if it exited first or timed out. */
  ready: Promise<void>;
  exited: Promise<ProcExit>;
  running(): boolean;
  /** Sends a signal if it still runs; does not wait. */
  kill(signal: NodeJS.Signals): void;
  /** SIGTERM, SIGKILL after graceMs; resolves with its exit. */
  stop(graceMs?: number): Promise<ProcExit>;
  logFile: string;
}

const live = new Set<Proc>();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Never leave processes behind, whatever way the orchestrator ends.
  process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
  });
}

/** Forks one app main with its output going straight to `logFile` (no pipe through us). */
export function spawnProc(
  name: string,
  service: Service,
  module: string,
  env: NodeJS.ProcessEnv,
  logFile: string,
  readyTimeoutMs = 60_000,
  /** Working directory (default this process's): relative TOOL_PACKS resolve against it. */
  cwd?: string,
): Proc {
  installExitHook();
  const fd = openSync(logFile, 'a');
  const child = fork(module, [], {
    execPath: process.execPath,
    execArgv: process.env.BENCH_PROFILE_DIR
      ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`]
      : [],
    env,
    stdio: ['ignore', fd, fd, 'ipc'],
    ...(cwd ? { cwd } : {}),
  });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`${name}: could not start`);
  const exited = new Promise<ProcExit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let timer: NodeJS.Timeout | undefined;
  const ready = Promise.race([
    new Promise<void>((resolve) =>
      child.on('message', (m: unknown) => {
        if ((m as { type?: string } | null)?.type === 'ready') resolve();
      }),
    ),
    exited.then((e): never => {
      throw new Error(
        `${name} exited (${e.signal ?? e.code}) before it was ready; log: ${tail(logFile)}`,
      );
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${name} not ready in ${readyTimeoutMs} ms; log: ${tail(logFile)}`)),
        readyTimeoutMs,
      );
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
  ready.catch(() => {});
  const running = () => child.exitCode === null && child.signalCode === null;
  const proc: Proc = {
    name,
    service,
    pid: child.pid,
    child,
    ready,
    exited,
    running,
    logFile,
    kill(signal) {
      if (running()) child.kill(signal);
    },
    async stop(graceMs = 15_000) {
      if (!running()) return exited;
      child.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      const e = await exited;
      clearTimeout(t);
      return e;
    },
  };
  live.add(proc);
  void exited.then(() => live.delete(proc));
  return proc;
}

function tail(file: string, lines = 8): string {
  try {
    return '\n  | ' + readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n  | ');
  } catch {
    return '(no log)';
  }
}

export interface ProcessStackOptions {
  /** Owner URL of a migrated database with the job queue installed (prepareDatabase). */
  databaseUrl: string;
  /** The login each process connects with (provisionDatabaseLogins); the owner's goes to none. */
  databaseUrls: DatabaseUrls;
  workers?: number;
  gateways?: number;
  /** Ports reserved for this many replicas (>= gateways), so more can be started later. */
  gatewaySlots?: number;
  /** Extra environment for every process (DEMO_STEP_MS, LOG_LEVEL, caps …). */
  env?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  workerEnv?: Record<string, string>;
  idpEnv?: Record<string, string>;
  /** Where process logs go; default a fresh temp dir, removed by stop() unless keepLogs. */
  dataDir?: string;
  keepLogs?: boolean;
  /**
   * Restart a worker that exits on its own after 1 s, as the launcher does (off by default:
   * chaos tests that kill workers restart them themselves). Exits are recorded in `crashes`.
   */
  superviseWorkers?: boolean;
}

export interface ProcessStack {
  mcpUrl: string;
  /** Base URL of each gateway replica (index 0 is the one whose URL is the token audience). */
  gatewayUrls: string[];
  /** The MCP endpoint of each replica. */
  mcpUrls: string[];
  idpUrl: string;
  downstreamUrl: string;
  databaseUrl: string;
  dataDir: string;
  secrets: DevSecrets;
  idp: Proc;
  downstream: Proc;
  gateways: Proc[];
  /** Live worker processes by worker id. */
  workers: Map<string, Proc>;
  /** Workers that exited without being asked to (with superviseWorkers), in order. */
  crashes: Array<{ worker: string; exit: ProcExit; at: number; logTail: string }>;
  token(
    sub: string,
    tenant: string,
    options?: { client?: string; scope?: string; ttl?: number },
  ): Promise<string>;
  /**
   * Starts (or restarts) worker `id` and waits for it to be ready. `root`: the checkout whose
   * apps/worker/src/main.ts runs, in that directory (default this one; another release's
   * checkout for upgrade tests).
   */
  startWorker(id: string, env?: Record<string, string>, root?: string): Promise<Proc>;
  /** Starts gateway replica `index` (again) on its port and waits for it to be ready. */
  startGateway(index: number, env?: Record<string, string>, root?: string): Promise<Proc>;
  stop(): Promise<void>;
}

/** Starts IdP, downstream, gateways and workers in the launcher's order. */
export async function startProcessStack(o: ProcessStackOptions): Promise<ProcessStack> {
  const dataDir = o.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'mtg-stack-proc-'));
  mkdirSync(path.join(dataDir, 'logs'), { recursive: true });
  const secrets = generateDevSecrets();
  const gatewayPorts: number[] = [];
  const slots = Math.max(o.gateways ?? 1, o.gatewaySlots ?? 0);
  for (let i = 0; i < slots; i++) gatewayPorts.push(await freePort());
  const config = {
    GATEWAY_PORT: gatewayPorts[0]!,
    IDP_PORT: await freePort(),
    DOWNSTREAM_PORT: await freePort(),
    WORKERS: o.workers ?? 2,
    LOG_LEVEL: 'info',
  } as unknown as LauncherConfig;
  // The benches' 100,000-record updates measure the task path, not a wait for an approver.
  const base: NodeJS.ProcessEnv = {
    DEMO_APPROVAL_ABOVE: '100000000',
    ...process.env,
    LOG_LEVEL: 'info',
    ...o.env,
  };
  // Variables of the orchestrating process that would confuse the apps.
  delete base.NODE_OPTIONS;
  delete base.EMBEDDED_PG_PORT;
  const envFor = (service: Service, workerId?: string) =>
    childEnv(service, {
      config,
      databaseUrls: o.databaseUrls,
      secrets,
      dataDir,
      base,
      ...(workerId ? { workerId } : {}),
    });
  const moduleOf = (s: Service, root = REPO_ROOT) => path.join(root, 'apps', s, 'src', 'main.ts');
  const logOf = (name: string) => path.join(dataDir, 'logs', `${name}.log`);

  const idp = spawnProc(
    'idp',
    'idp',
    moduleOf('idp'),
    { ...envFor('idp'), ...o.idpEnv },
    logOf('idp'),
  );
  await idp.ready;
  const downstream = spawnProc(
    'downstream',
    'downstream',
    moduleOf('downstream'),
    envFor('downstream'),
    logOf('downstream'),
  );
  await downstream.ready;

  const gateways: Proc[] = [];
  const startGateway = async (
    index: number,
    extra: Record<string, string> = {},
    root = REPO_ROOT,
  ) => {
    // Every replica serves the same resource (the audience of the tokens), on its own port.
    const env = {
      ...envFor('gateway'),
      ...o.gatewayEnv,
      ...extra,
      GATEWAY_PORT: String(gatewayPorts[index]),
    };
    const p = spawnProc(
      `gateway-${index + 1}`,
      'gateway',
      moduleOf('gateway', root),
      env,
      logOf(`gateway-${index + 1}`),
      undefined,
      root,
    );
    gateways[index] = p;
    await p.ready;
    return p;
  };
  const workers = new Map<string, Proc>();
  const crashes: ProcessStack['crashes'] = [];
  let stopping = false;
  const startWorker = async (
    id: string,
    extra: Record<string, string> = {},
    root = REPO_ROOT,
  ): Promise<Proc> => {
    const env = { ...envFor('worker', id), ...o.workerEnv, ...extra };
    const p = spawnProc(id, 'worker', moduleOf('worker', root), env, logOf(id), undefined, root);
    workers.set(id, p);
    let asked = false;
    const stop = p.stop.bind(p);
    const kill = p.kill.bind(p);
    p.stop = (graceMs) => ((asked = true), stop(graceMs));
    p.kill = (signal) => ((asked = true), kill(signal));
    void p.exited.then((exit) => {
      if (workers.get(id) === p) workers.delete(id);
      if (!o.superviseWorkers || asked || stopping) return;
      crashes.push({ worker: id, exit, at: Date.now(), logTail: tail(p.logFile, 40) });
      setTimeout(() => {
        if (!stopping) startWorker(id, extra, root).catch(() => {});
      }, 1000);
    });
    await p.ready;
    return p;
  };

  const stack: ProcessStack = {
    mcpUrl: `http://127.0.0.1:${gatewayPorts[0]}/mcp`,
    gatewayUrls: gatewayPorts.map((p) => `http://127.0.0.1:${p}`),
    mcpUrls: gatewayPorts.map((p) => `http://127.0.0.1:${p}/mcp`),
    idpUrl: `http://127.0.0.1:${config.IDP_PORT}`,
    downstreamUrl: `http://127.0.0.1:${config.DOWNSTREAM_PORT}`,
    databaseUrl: o.databaseUrl,
    dataDir,
    secrets,
    idp,
    downstream,
    gateways,
    workers,
    crashes,
    startWorker,
    startGateway,
    token(sub, tenant, t = {}) {
      const client = t.client ?? 'mcp-agent';
      return devUserToken({
        issuer: stack.idpUrl,
        client,
        clientSecret: secrets.clientSecrets[client as keyof typeof secrets.clientSecrets],
        sub,
        tenant,
        resource: stack.mcpUrl,
        ...(t.scope !== undefined ? { scope: t.scope } : {}),
        ...(t.ttl !== undefined ? { ttl: t.ttl } : {}),
      });
    },
    async stop() {
      stopping = true;
      // The launcher's order: gateways and workers, then the downstream, then the IdP.
      await Promise.all([...gateways.filter(Boolean), ...workers.values()].map((p) => p.stop()));
      await downstream.stop();
      await idp.stop();
      if (!o.keepLogs && !o.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(Array.from({ length: o.gateways ?? 1 }, (_, i) => startGateway(i)));
    await Promise.all(
      Array.from({ length: o.workers ?? 2 }, (_, i) => startWorker(`worker-${i + 1}`)),
    );
  } catch (error) {
    await stack.stop().catch(() => {});
    throw error;
  }
  return stack;
}

/** Resident memory of a process in MB: current (VmRSS) and peak (VmHWM), from /proc. */
export function residentMemory(pid: number): { rssMb: number; peakMb: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) =>
      Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return undefined;
  }
}
