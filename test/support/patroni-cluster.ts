import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { access, chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pollUntil } from '../../scripts/lib/poll-until.ts';
import { freePort } from './stack.ts';

/**
 * A replicated PostgreSQL as production runs it, on loopback: etcd as the store, Patroni
 * managing each PostgreSQL node (as the OS user postgres), HAProxy routing to whichever node
 * Patroni's REST API calls the primary. The stack reaches the database only through
 * `url` (HAProxy's address), as it would a managed database's endpoint. Everything here is
 * Debian's packages (.ci/install-ha.sh) and the machine's PostgreSQL 15 binaries; ports are
 * free loopback ports, data lives in a temp dir, and stop() ends every process it started.
 */

const run = promisify(execFile);
const PG_BIN = process.env.HA_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const PATRONI = '/usr/bin/patroni';
const PATRONICTL = '/usr/bin/patronictl';
const SCOPE = 'mtg';

export interface PatroniNode {
  name: string;
  pgPort: number;
  apiPort: number;
  config: string;
  /** The Patroni process (its postmaster is a child of it), while it runs. */
  patroni?: ChildProcess;
}

export interface PatroniCluster {
  /** Superuser URL through HAProxy: always the current primary, or refused while none. */
  url: string;
  routerPort: number;
  nodes: PatroniNode[];
  dir: string;
  synchronous: boolean;
  /** The node Patroni's REST API calls the leader (polls until one answers so). */
  leader(timeoutMs?: number): Promise<PatroniNode>;
  /**
   * Kills the leader node the way a machine dies: SIGKILL to Patroni and to its postmaster
   * together (killing only the postmaster makes Patroni restart it in place: no failover).
   */
  killLeader(): Promise<{ killed: PatroniNode; at: number }>;
  /** `patronictl switchover` to another node; resolves once patronictl returns. */
  switchover(): Promise<{ from: PatroniNode; to: PatroniNode; at: number }>;
  /** Starts a killed node's Patroni again: it rejoins as a replica (pg_rewind if needed). */
  restartNode(node: PatroniNode): Promise<void>;
  /** Waits until every node runs and every replica streams from the leader. */
  healthy(timeoutMs?: number): Promise<void>;
  /**
   * The pid of a replica's WAL receiver: SIGSTOP it and the replica stops confirming WAL (as a
   * lagging asynchronous standby does); SIGCONT and it catches up.
   */
  walReceiverPid(node: PatroniNode): Promise<number | undefined>;
  /** The members as patronictl list shows them. */
  members(): Promise<Array<{ name: string; role: string; state: string; lag?: number | string }>>;
  stop(): Promise<void>;
}

/** Why the HA parts are missing here (the caller skips, saying so), or undefined. */
export async function haMissing(): Promise<string | undefined> {
  for (const f of [PATRONI, PATRONICTL, '/usr/bin/etcd', '/usr/sbin/haproxy', `${PG_BIN}/postgres`])
    try {
      await access(f);
    } catch {
      return `${f} does not exist (run .ci/install-ha.sh)`;
    }
  return undefined;
}

async function osUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

function logTo(child: ChildProcess, file: string) {
  void import('node:fs').then(({ createWriteStream }) => {
    const out = createWriteStream(file, { flags: 'a' });
    // Two sources into one file: neither may end it, or the other's last lines are a
    // 'write after end' error that fails the suite after its tests passed. It ends when
    // the child has closed both.
    out.on('error', () => {});
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    if (child.exitCode !== null || child.signalCode !== null) out.end();
    else child.once('close', () => out.end());
  });
}

const safeKill = (pid: number) => {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* gone */
  }
};

const exited = (c: ChildProcess) => c.exitCode !== null || c.signalCode !== null;

async function waitExit(c: ChildProcess | undefined, ms = 10_000) {
  if (!c || exited(c)) return;
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    c.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

async function api(node: PatroniNode, route: string): Promise<{ status: number; body: any }> {
  try {
    const r = await fetch(`http://127.0.0.1:${node.apiPort}${route}`, {
      signal: AbortSignal.timeout(2000),
    });
    const text = await r.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: r.status, body };
  } catch {
    return { status: 0, body: undefined };
  }
}

export async function startPatroniCluster(
  o: {
    nodes?: number;
    /** synchronous_mode (the documented production setting); false: asynchronous replication. */
    synchronous?: boolean;
    /** Patroni's leader key TTL, s (failure detection); loop_wait and retry_timeout follow. */
    ttl?: number;
    /** Extra PostgreSQL parameters. */
    parameters?: Record<string, string | number>;
  } = {},
): Promise<PatroniCluster> {
  const missing = await haMissing();
  if (missing) throw new Error(missing);
  const synchronous = o.synchronous ?? true;
  const ttl = o.ttl ?? 10;
  const owner = await osUser();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-patroni-'));
  await chmod(dir, 0o755); // the postgres user must enter it
  const children = new Set<ChildProcess>();
  // Whatever way the test process ends, nothing of the cluster is left running.
  const postmasters = new Set<number>();
  const onExit = () => {
    for (const c of children) {
      if (exited(c) || !c.pid) continue;
      safeKill(-c.pid); // Patroni's process group
      safeKill(c.pid);
    }
    // A postmaster lives in a session of its own; only ours (its pid may have been reused).
    for (const pid of postmasters) {
      try {
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir)) safeKill(pid);
      } catch {
        /* gone */
      }
    }
  };
  process.on('exit', onExit);

  const etcdClient = await freePort();
  const etcdPeer = await freePort();
  const etcd = spawn(
    '/usr/bin/etcd',
    [
      '--name=e0',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=e0=http://127.0.0.1:${etcdPeer}`,
      '--log-level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(etcd);
  logTo(etcd, path.join(dir, 'etcd.log'));
  await pollUntil(
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${etcdClient}/health`)).ok;
      } catch {
        return false;
      }
    },
    (ok) => ok,
    20_000,
    200,
    'etcd healthy',
  );

  const nodes: PatroniNode[] = [];
  for (let i = 0; i < (o.nodes ?? 2); i++) {
    const name = `pg${i}`;
    const pgPort = await freePort();
    const apiPort = await freePort();
    const nodeDir = path.join(dir, name);
    await mkdir(nodeDir, { mode: 0o700 });
    if (owner) await chown(nodeDir, owner.uid, owner.gid);
    const config = path.join(dir, `${name}.yml`);
    // Failure detection: the leader key lives `ttl` s; loop_wait + 2 × retry_timeout ≤ ttl.
    const loopWait = Math.max(1, Math.floor(ttl / 5));
    const retryTimeout = Math.max(1, Math.floor((ttl - loopWait) / 2));
    const parameters = {
      max_connections: 300,
      wal_level: 'replica',
      hot_standby: 'on',
      max_wal_senders: 10,
      max_replication_slots: 10,
      wal_keep_size: '256MB',
      // The processes are killed, never the machine: the OS keeps written pages, so fsync
      // is not what this suite tests, and without it the shared 2-core machine keeps up.
      fsync: 'off',
      synchronous_commit: 'on',
      ...(o.parameters ?? {}),
    };
    await writeFile(
      config,
      [
        `scope: ${SCOPE}`,
        `name: ${name}`,
        `log: { level: WARNING, dir: ${nodeDir}-log }`,
        `restapi: { listen: '127.0.0.1:${apiPort}', connect_address: '127.0.0.1:${apiPort}' }`,
        `etcd3: { hosts: ['127.0.0.1:${etcdClient}'] }`,
        'bootstrap:',
        '  dcs:',
        `    ttl: ${ttl}`,
        `    loop_wait: ${loopWait}`,
        `    retry_timeout: ${retryTimeout}`,
        '    maximum_lag_on_failover: 1048576',
        `    synchronous_mode: ${synchronous}`,
        '    postgresql:',
        '      use_pg_rewind: true',
        '      use_slots: true',
        `      parameters: ${JSON.stringify(parameters)}`,
        '  initdb: [{ encoding: UTF8 }, { locale: C }]',
        '  pg_hba:',
        '    - local all all trust',
        '    - host all all 127.0.0.1/32 trust',
        '    - host replication all 127.0.0.1/32 trust',
        'postgresql:',
        `  listen: '127.0.0.1:${pgPort}'`,
        `  connect_address: '127.0.0.1:${pgPort}'`,
        `  data_dir: ${path.join(nodeDir, 'data')}`,
        `  bin_dir: ${PG_BIN}`,
        `  pgpass: ${path.join(nodeDir, 'pgpass')}`,
        '  authentication:',
        '    superuser: { username: postgres, password: postgres }',
        '    replication: { username: replicator, password: replicator }',
        '    rewind: { username: postgres, password: postgres }',
        '  pg_hba:',
        '    - local all all trust',
        '    - host all all 127.0.0.1/32 trust',
        '    - host replication all 127.0.0.1/32 trust',
        `  parameters: { unix_socket_directories: '${nodeDir}' }`,
        '',
      ].join('\n'),
    );
    await mkdir(`${nodeDir}-log`);
    if (owner) {
      await chown(`${nodeDir}-log`, owner.uid, owner.gid);
      await chown(config, owner.uid, owner.gid);
    }
    nodes.push({ name, pgPort, apiPort, config });
  }

  const startNode = (node: PatroniNode) => {
    const child = spawn(PATRONI, [node.config], {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
      env: { PATH: process.env.PATH, HOME: dir, LANG: 'C.UTF-8' },
      detached: true, // its own process group: the kill takes Patroni and its postmaster
    });
    children.add(child);
    child.once('exit', () => children.delete(child));
    logTo(child, path.join(dir, `${node.name}.log`));
    node.patroni = child;
  };
  // The first node bootstraps the cluster; the others clone it once it leads.
  startNode(nodes[0]!);
  await pollUntil(
    () => api(nodes[0]!, '/primary'),
    (r) => r.status === 200,
    60_000,
    300,
  );
  for (const n of nodes.slice(1)) startNode(n);

  const routerPort = await freePort();
  const statsPort = await freePort();
  const haproxyCfg = path.join(dir, 'haproxy.cfg');
  // Health checks every 500 ms against Patroni's /primary (200 only on the leader); a server
  // marked down has its sessions shut so clients see a broken connection, not a hang.
  await writeFile(
    haproxyCfg,
    [
      'global',
      '  maxconn 2000',
      'defaults',
      '  mode tcp',
      '  timeout connect 2s',
      '  timeout client 30m',
      '  timeout server 30m',
      '  timeout check 1s',
      'listen primary',
      `  bind 127.0.0.1:${routerPort}`,
      '  option httpchk OPTIONS /primary',
      '  http-check expect status 200',
      '  default-server inter 500ms fastinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions',
      ...nodes.map((n) => `  server ${n.name} 127.0.0.1:${n.pgPort} check port ${n.apiPort}`),
      'listen stats',
      `  bind 127.0.0.1:${statsPort}`,
      '  mode http',
      '  stats enable',
      '  stats uri /',
      '',
    ].join('\n'),
  );
  const haproxy = spawn('/usr/sbin/haproxy', ['-db', '-f', haproxyCfg], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(haproxy);
  logTo(haproxy, path.join(dir, 'haproxy.log'));

  const url = `postgres://postgres:postgres@127.0.0.1:${routerPort}/postgres`;

  const leader = async (timeoutMs = 60_000) => {
    let found: PatroniNode | undefined;
    await pollUntil(
      async () => {
        for (const n of nodes)
          if ((await api(n, '/primary')).status === 200) {
            found = n;
            return true;
          }
        return false;
      },
      (ok) => ok,
      timeoutMs,
      100,
    );
    return found!;
  };

  const members = async () => {
    const { stdout } = await run(PATRONICTL, ['-c', nodes[0]!.config, 'list', '-f', 'json'], {
      env: { ...process.env, PATH: `/usr/bin:${process.env.PATH}` },
    });
    return (JSON.parse(stdout) as Array<Record<string, unknown>>).map((m) => ({
      name: String(m.Member),
      role: String(m.Role),
      state: String(m.State),
      lag: m['Lag in MB'] as number | string | undefined,
    }));
  };

  const healthy = async (timeoutMs = 90_000) => {
    await pollUntil(
      async () => {
        try {
          const ms = await members();
          return (
            ms.length === nodes.length &&
            ms.filter((m) => m.role === 'Leader' && m.state === 'running').length === 1 &&
            // Patroni 3.0 shows a replica as running (later ones: streaming), with its lag.
            ms.every((m) => m.state === 'running' || m.state === 'streaming') &&
            ms.every((m) => m.role === 'Leader' || typeof m.lag === 'number') &&
            (!synchronous || ms.some((m) => m.role === 'Sync Standby'))
          );
        } catch {
          return false;
        }
      },
      (ok) => ok,
      timeoutMs,
      300,
    );
    // HAProxy sees the leader too (rise 1, inter 500 ms).
    await pollUntil(
      async () => {
        const { default: pg } = await import('pg');
        const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
        try {
          await c.connect();
          const r = await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
          return r.rows[0]?.r === false;
        } catch {
          return false;
        } finally {
          await c.end().catch(() => {});
        }
      },
      (ok) => ok,
      20_000,
      200,
    );
  };

  /** The postmaster's pid from its pid file (Patroni starts it in a session of its own). */
  const postmasterPid = async (node: PatroniNode): Promise<number | undefined> => {
    try {
      const text = await readFile(path.join(dir, node.name, 'data', 'postmaster.pid'), 'utf8');
      const pid = Number(text.split('\n')[0]);
      if (pid > 0) postmasters.add(pid);
      return pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  };
  /** Runs and is no zombie (an orphan is reparented to an init that may never reap it). */
  const alive = async (pid: number) => {
    try {
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      return !/^State:\s+Z/m.test(status);
    } catch {
      return false;
    }
  };

  const walReceiverPid = async (node: PatroniNode) => {
    const pm = await postmasterPid(node);
    if (!pm) return undefined;
    const { readdir } = await import('node:fs/promises');
    for (const entry of await readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8');
        if (!cmd.includes('walreceiver')) continue;
        const status = await readFile(`/proc/${entry}/status`, 'utf8');
        if (Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) === pm) return Number(entry);
      } catch {
        /* gone meanwhile */
      }
    }
    return undefined;
  };

  const cluster: PatroniCluster = {
    url,
    walReceiverPid,
    routerPort,
    nodes,
    dir,
    synchronous,
    leader,
    members,
    healthy,
    async killLeader() {
      const killed = await leader();
      const pm = await postmasterPid(killed);
      const at = Date.now();
      // The whole process group (Patroni is its leader, the postmaster and backends its
      // descendants), and the postmaster by pid in case it left the group.
      try {
        process.kill(-killed.patroni!.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
      if (pm)
        try {
          process.kill(pm, 'SIGKILL');
        } catch {
          /* gone */
        }
      await waitExit(killed.patroni);
      if (pm)
        await pollUntil(
          () => alive(pm),
          (up) => !up,
          10_000,
          50,
          'the killed postmaster gone',
        );
      return { killed, at };
    },
    async switchover() {
      const from = await leader();
      const to = nodes.find((n) => n !== from && n.patroni && !exited(n.patroni))!;
      const at = Date.now();
      await run(
        PATRONICTL,
        [
          '-c',
          from.config,
          'switchover',
          SCOPE,
          '--leader',
          from.name,
          '--candidate',
          to.name,
          '--force',
        ],
        { env: { ...process.env, PATH: `/usr/bin:${process.env.PATH}` } },
      );
      return { from, to, at };
    },
    async restartNode(node) {
      if (node.patroni && !exited(node.patroni)) return;
      // The old postmaster must be gone before a new one may take its data directory.
      const pm = await postmasterPid(node);
      if (pm)
        await pollUntil(
          () => alive(pm),
          (up) => !up,
          10_000,
          100,
          'the old postmaster gone',
        );
      startNode(node);
    },
    async stop() {
      for (const n of nodes) {
        if (n.patroni && !exited(n.patroni)) {
          n.patroni.kill('SIGTERM');
          await waitExit(n.patroni, 15_000);
          try {
            process.kill(-n.patroni.pid!, 'SIGKILL');
          } catch {
            /* gone */
          }
        }
      }
      for (const n of nodes) {
        const pm = await postmasterPid(n);
        if (pm && (await alive(pm)))
          try {
            process.kill(pm, 'SIGKILL');
          } catch {
            /* gone */
          }
      }
      for (const c of children) if (!exited(c)) c.kill('SIGKILL');
      await Promise.all([...children].map((c) => waitExit(c, 5000)));
      process.off('exit', onExit);
      if (process.env.HA_KEEP_DIR !== '1') await rm(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}
