// `npm start` gives the gateway, the workers and the downstream each a LOGIN role of its own
// (`mtg_login_<service>`, member of its group role only, password in dev-secrets.json) and
// keeps the owner's URL for migrations and the queue install. Checked on the launcher's
// parts and on a real `npm start` over its embedded PostgreSQL (password authentication, so
// the generated passwords are really used).
import { fork } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import YAML from 'yaml';
import { parseConfig } from '@mtg/config';
import { dropLoginRoles, provisionLoginRoles } from '@mtg/db';
import { childEnv, type Service } from '../../apps/cli/src/launcher/child-env.ts';
import { launcherConfigSchema } from '../../apps/cli/src/launcher/config.ts';
import {
  generateDevSecrets,
  loadOrCreateDevSecrets,
  generateDatabasePasswords,
} from '@mtg/dev-secrets';
import { provisionDatabaseLogins } from '../../apps/cli/src/launcher/database-logins.ts';
import { adminDatabaseUrl, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { pollUntil } from '../support/poll.ts';
import { freePort } from '../support/stack.ts';

const OWNER = 'postgres://postgres:owner-secret@127.0.0.1:5432/postgres';
const urls = {
  gateway: 'postgres://mtg_login_gateway:g@127.0.0.1:5432/postgres',
  worker: 'postgres://mtg_login_worker:w@127.0.0.1:5432/postgres',
  downstream: 'postgres://mtg_login_downstream:d@127.0.0.1:5432/postgres',
};

test('each child gets its own login URL, the IdP none, and none the owner URL the launcher was given', () => {
  const base = { DATABASE_URL: OWNER, WORKERS: '1' };
  const config = parseConfig(launcherConfigSchema, base);
  const envOf = (service: Service) =>
    childEnv(service, {
      config,
      databaseUrls: urls,
      secrets: generateDevSecrets(),
      dataDir: '/tmp/x',
      base,
      ...(service === 'worker' ? { workerId: 'worker-1', workerIndex: 1 } : {}),
    });
  expect({
    idp: envOf('idp').DATABASE_URL,
    gateway: envOf('gateway').DATABASE_URL,
    worker: envOf('worker').DATABASE_URL,
    downstream: envOf('downstream').DATABASE_URL,
  }).toEqual({ idp: undefined, ...urls });
  for (const service of ['idp', 'gateway', 'worker', 'downstream'] as const) {
    expect(JSON.stringify(envOf(service))).not.toContain('owner-secret');
  }
});

test('a dev-secrets.json from before the database logins gains their passwords and keeps the rest', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-secrets-'));
  try {
    const { databasePasswords: _, ...old } = generateDevSecrets();
    await writeFile(path.join(dir, 'dev-secrets.json'), JSON.stringify(old), { mode: 0o600 });
    const upgraded = await loadOrCreateDevSecrets(dir);
    expect(upgraded).toMatchObject(old);
    expect(Object.keys(upgraded.databasePasswords).sort()).toEqual([
      'downstream',
      'gateway',
      'worker',
    ]);
    expect(await loadOrCreateDevSecrets(dir)).toEqual(upgraded);
    expect((await stat(path.join(dir, 'dev-secrets.json'))).mode & 0o777).toBe(0o600);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

describe('provisioning on a real server', () => {
  let db: TestDatabase;
  let owner: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    owner = new pg.Client({ connectionString: db.url });
    await owner.connect();
  });
  afterAll(async () => {
    for (const s of ['gateway', 'worker', 'downstream', 'su'])
      await owner.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(`${db.name}_x_${s}`)}`);
    await owner.end();
    await db.drop();
  });

  test('is idempotent and takes back any membership granted by hand', async () => {
    const prefix = `${db.name}_x`;
    await provisionDatabaseLogins(db.url, prefix, generateDatabasePasswords());
    await owner.query(
      `GRANT mtg_auditor, mtg_worker TO ${pg.escapeIdentifier(`${prefix}_gateway`)}`,
    );
    await provisionDatabaseLogins(db.url, prefix, generateDatabasePasswords());
    const { rows } = await owner.query(
      `SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
        JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = $1`,
      [`${prefix}_gateway`],
    );
    expect(rows.map((r) => r.rolname)).toEqual(['mtg_gateway']);
  });

  test('refuses to turn a superuser into an application login', async () => {
    const name = `${db.name}_x_su`;
    await owner.query(`CREATE ROLE ${pg.escapeIdentifier(name)} SUPERUSER NOLOGIN`);
    await expect(
      provisionLoginRoles(db.url, [{ name, password: 'p', group: 'mtg_gateway' }]),
    ).rejects.toThrow(/is a superuser/);
    const { rows } = await owner.query('SELECT rolsuper FROM pg_roles WHERE rolname = $1', [name]);
    expect(rows[0].rolsuper).toBe(true);
  });
});

test('npm start: every session of the stack logs in as mtg_login_<service>, none as a superuser', async () => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-launcher-'));
  // As root the embedded server runs as the OS user postgres, which must enter the directory.
  await chmod(dataDir, 0o755);
  const pgPort = await freePort();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    DATA_DIR: dataDir,
    EMBEDDED_PG_PORT: String(pgPort),
    GATEWAY_PORT: String(await freePort()),
    IDP_PORT: String(await freePort()),
    DOWNSTREAM_PORT: String(await freePort()),
    // Every port the launcher listens on, not its defaults: a busy machine (or a second
    // run) may hold 9600 or 9700.
    UPSTREAM_DEMO_PORT: String(await freePort()),
    CONSOLE_PORT: String(await freePort()),
    WORKERS: '1',
    LOG_LEVEL: 'warn',
  };
  const launcher = fork(fileURLToPath(new URL('../../scripts/start.ts', import.meta.url)), [], {
    env,
    execArgv: [],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  launcher.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  launcher.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) =>
    launcher.once('exit', (code) => resolve(code)),
  );
  try {
    await Promise.race([
      new Promise<void>((resolve) => launcher.once('message', () => resolve())),
      exited.then((code) => {
        throw new Error(`npm start exited with ${code} before ready:\n${output}`);
      }),
    ]);
    const password = (
      await readFile(path.join(dataDir, 'postgres', 'embedded-superuser-password'), 'utf8')
    ).trim();
    const superuser = new pg.Client({
      connectionString: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}/postgres`,
    });
    await superuser.connect();
    try {
      // Every login seen in any sample. A pool closes a connection idle for 10 s, so on a busy
      // machine the downstream (started first) may hold none when the stack is ready: each
      // service with a pool is asked to use it while we look, until all four have been seen.
      const seen = new Map<string, boolean>();
      // The checkpoint signer holds one session for its life: it is seen once it has started.
      const expected = ['checkpoints', 'console', 'downstream', 'gateway', 'worker'].map(
        (s) => `mtg_login_${s}`,
      );
      await pollUntil(
        async () => {
          await fetch(`http://127.0.0.1:${env.DOWNSTREAM_PORT}/_writes?taskId=none`);
          await fetch(`http://127.0.0.1:${env.CONSOLE_PORT}/readyz`);
          const sample = await superuser.query<{ usename: string; rolsuper: boolean }>(
            `SELECT DISTINCT a.usename, r.rolsuper FROM pg_stat_activity a
               JOIN pg_roles r ON r.rolname = a.usename
              WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()`,
          );
          for (const r of sample.rows) seen.set(r.usename, r.rolsuper);
          return [...seen.keys()];
        },
        (names) => expected.every((n) => names.includes(n)),
        30_000,
        100,
        "every service's login in pg_stat_activity",
      );
      const rows = [...seen]
        .map(([usename, rolsuper]) => ({ usename, rolsuper }))
        .sort((x, y) => x.usename.localeCompare(y.usename));
      expect(rows).toEqual([
        // The checkpoint signer (audit checkpoint --every) in mtg_audit_signer, not the owner.
        { usename: 'mtg_login_checkpoints', rolsuper: false },
        // The console reads the audit views through a login of its own (member of mtg_console).
        { usename: 'mtg_login_console', rolsuper: false },
        { usename: 'mtg_login_downstream', rolsuper: false },
        { usename: 'mtg_login_gateway', rolsuper: false },
        { usename: 'mtg_login_worker', rolsuper: false },
      ]);
      const memberships = await superuser.query<{ login: string; groups: string[] }>(
        `SELECT u.rolname AS login, array_agg(g.rolname::text ORDER BY g.rolname) AS groups
           FROM pg_auth_members m
           JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
          WHERE u.rolname IN ('mtg_login_console', 'mtg_login_checkpoints')
          GROUP BY u.rolname ORDER BY u.rolname`,
      );
      expect(memberships.rows).toEqual([
        { login: 'mtg_login_checkpoints', groups: ['mtg_audit_signer'] },
        { login: 'mtg_login_console', groups: ['mtg_console'] },
      ]);
      // …and it signs under that login: the first checkpoint is stored.
      await pollUntil(
        async () =>
          Number((await superuser.query('SELECT count(*) AS n FROM audit.checkpoints')).rows[0].n),
        (n) => n > 0,
        30_000,
        200,
        'the first checkpoint',
      );
      const secrets = JSON.parse(await readFile(path.join(dataDir, 'dev-secrets.json'), 'utf8'));
      // Password authentication: the stored password is the one that works, and no other.
      const as = (password: string) =>
        new pg.Client({
          connectionString: `postgres://mtg_login_downstream:${encodeURIComponent(password)}@127.0.0.1:${pgPort}/postgres`,
        });
      const good = as(secrets.databasePasswords.downstream);
      await good.connect();
      expect((await good.query('SELECT current_user AS u')).rows[0].u).toBe('mtg_login_downstream');
      await good.end();
      await expect(as('wrong').connect()).rejects.toMatchObject({ code: '28P01' });
    } finally {
      await superuser.end();
    }
    launcher.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    if (launcher.exitCode === null) {
      launcher.kill('SIGTERM');
      await exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  }
}, 180_000);

describe('docker-compose and npm run migrate', () => {
  const root = new URL('../../', import.meta.url);

  test('docker-compose gives the owner to the migrate service only, and each app its own login', async () => {
    const compose = YAML.parse(await readFile(new URL('docker-compose.yml', root), 'utf8'), {
      merge: true,
    }) as { services: Record<string, { environment?: Record<string, string> }> };
    const users = Object.fromEntries(
      Object.entries(compose.services).map(([name, s]) => {
        const url = s.environment?.DATABASE_URL;
        return [name, url ? /^postgres:\/\/([^:]+):/.exec(url)![1] : undefined];
      }),
    );
    expect(users).toEqual({
      postgres: undefined,
      migrate: 'mtg',
      idp: undefined,
      downstream: 'mtg_login_downstream',
      gateway: 'mtg_login_gateway',
      worker: 'mtg_login_worker',
      console: 'mtg_login_console',
    });
    expect(Object.keys(compose.services.migrate!.environment!).sort()).toEqual([
      'CONSOLE_DATABASE_PASSWORD',
      'DATABASE_URL',
      'DOWNSTREAM_DATABASE_PASSWORD',
      'GATEWAY_DATABASE_PASSWORD',
      'TOOL_PACKS', // migrate installs the packs' queues
      'WORKER_DATABASE_PASSWORD',
    ]);
  });

  const migrate = (env: Record<string, string>) =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = fork(fileURLToPath(new URL('scripts/migrate.ts', root)), [], {
        env: { PATH: process.env.PATH, ...env },
        execArgv: [],
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
      let output = '';
      child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
      child.once('exit', (code) => resolve({ code, output }));
    });

  test('npm run migrate with some but not all login passwords names the missing ones (exit 2)', async () => {
    const { code, output } = await migrate({
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      GATEWAY_DATABASE_PASSWORD: 'x'.repeat(20),
    });
    expect({ code, output }).toEqual({
      code: 2,
      output:
        'migrate: invalid configuration:\n' +
        '  WORKER_DATABASE_PASSWORD: is required with GATEWAY_DATABASE_PASSWORD: every process gets its own login\n' +
        '  DOWNSTREAM_DATABASE_PASSWORD: is required with GATEWAY_DATABASE_PASSWORD: every process gets its own login\n',
    });
  });

  test('npm run migrate with the passwords creates the logins the compose services use', async () => {
    const db = await createTestDatabase({ migrate: false });
    const owner = new pg.Client({ connectionString: db.url });
    await owner.connect();
    const names = [
      'mtg_login_gateway',
      'mtg_login_worker',
      'mtg_login_downstream',
      'mtg_login_console',
    ];
    // Roles are cluster-wide: leave alone any that a stack on this server already uses.
    const existed = (
      await owner.query<{ rolname: string }>(
        'SELECT rolname FROM pg_roles WHERE rolname = ANY($1)',
        [names],
      )
    ).rows.map((r) => r.rolname);
    try {
      const { code, output } = await migrate({
        DATABASE_URL: db.url,
        GATEWAY_DATABASE_PASSWORD: 'g'.repeat(20),
        WORKER_DATABASE_PASSWORD: 'w'.repeat(20),
        DOWNSTREAM_DATABASE_PASSWORD: 'd'.repeat(20),
        CONSOLE_DATABASE_PASSWORD: 'c'.repeat(20),
      });
      expect({ code, last: output.trim().split('\n').at(-1) }).toEqual({
        code: 0,
        last: `login roles ready: ${names.join(', ')}`,
      });
      const { rows } = await owner.query(
        `SELECT u.rolname, array_agg(g.rolname::text) AS member_of
           FROM pg_roles u JOIN pg_auth_members m ON m.member = u.oid
           JOIN pg_roles g ON g.oid = m.roleid
          WHERE u.rolname = ANY($1) GROUP BY u.rolname ORDER BY u.rolname`,
        [names],
      );
      expect(rows).toEqual([
        { rolname: 'mtg_login_console', member_of: ['mtg_console'] },
        { rolname: 'mtg_login_downstream', member_of: ['mtg_downstream'] },
        { rolname: 'mtg_login_gateway', member_of: ['mtg_gateway'] },
        { rolname: 'mtg_login_worker', member_of: ['mtg_worker'] },
      ]);
    } finally {
      await owner.end();
      await db.drop();
      const leftover = names.filter((n) => !existed.includes(n));
      if (leftover.length) await dropLoginRoles(adminDatabaseUrl(), leftover);
    }
  });
});
