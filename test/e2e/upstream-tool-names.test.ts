// Names, limits and pages of upstream tools (docs/upstreams.md, "Names, limits and pages"):
// an upstream tool never takes a gateway tool's name, a bad listing refuses only its own
// tools (logged, counted, shown to operators), stale catalogue rows never stop a start, an
// upstream's tools are capped, and tools/list is paged on every wire.
import { randomUUID } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ListToolsResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { readUpstreamRefusals } from '../../apps/console/src/queries/upstream-refusals.ts';
import { createPool, ROLES } from '@mtg/db';
import { launchChromium, logIn, newContext } from '../support/browser.ts';
import { connectV1 } from '../support/clients.ts';
import { startConsole, type TestConsole } from '../support/console.ts';
import { startFakeUpstream } from '../support/fake-upstream.ts';
import { sample } from '../support/metrics-sample.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

type Fake = Awaited<ReturnType<typeof startFakeUpstream>>;
let stack: Stack;
let token: string;
let fakes: Record<'good' | 'jobs' | 'who' | 'pack' | 'many', Fake>;
let consoleApp: TestConsole;

const MANY = 260;
const MANY_CAP = 250;

beforeAll(async () => {
  fakes = {
    good: await startFakeUpstream([{ name: 'ok' }]),
    // Each prefix is non-empty and overlaps no other, yet prefix + name is a gateway tool's.
    jobs: await startFakeUpstream([{ name: 'job', taskSupport: 'optional' }, { name: 'other' }]),
    who: await startFakeUpstream([{ name: 'ami' }, { name: 'm' }]),
    pack: await startFakeUpstream([{ name: 'report', taskSupport: 'optional' }]),
    many: await startFakeUpstream(
      Array.from({ length: MANY }, (_, i) => ({ name: `t${String(i).padStart(3, '0')}` })),
    ),
  };
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-upstream-names-'));
  const file = path.join(dir, 'upstreams.yaml');
  const entry = (name: keyof typeof fakes, prefix: string, more = '') =>
    `  ${name}: { url: "${fakes[name].url}", scope: "upstream:fake", prefix: "${prefix}"${more} }`;
  await writeFile(
    file,
    [
      'upstreams:',
      entry('good', 'good.'),
      entry('jobs', 'cancel_'),
      entry('who', 'who'),
      entry('pack', 'generate_'),
      entry('many', 'many.', `, maxTools: ${MANY_CAP}`),
      '',
    ].join('\n'),
  );
  stack = await startStack({ env: { UPSTREAMS_FILE: file } });
  token = await stack.token('alice', 'acme');
  consoleApp = await startConsole(stack);
});
afterAll(async () => {
  await consoleApp?.close();
  await stack?.close();
  for (const f of Object.values(fakes ?? {})) await f.close();
});

/** Every tools/list page through the v1 SDK (2025-11-25), following nextCursor. */
async function allToolNames(): Promise<{ names: string[]; pages: number }> {
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const names: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.request(
        { method: 'tools/list', params: cursor ? { cursor } : {} },
        ListToolsResultSchema,
      );
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 50);
    return { names, pages };
  } finally {
    await client.close();
  }
}

const countOf = (names: string[], name: string) => names.filter((n) => n === name).length;

test('an upstream tool named like a gateway tool is refused, only it: each gateway tool is listed once and stays the gateway’s', async () => {
  const { names } = await allToolNames();
  for (const own of ['whoami', 'cancel_job', 'get_job_status', 'list_jobs', 'generate_report']) {
    expect([own, countOf(names, own)]).toEqual([own, 1]);
  }
  // The same upstreams' other tools are served.
  expect(names).toEqual(expect.arrayContaining(['good.ok', 'cancel_other', 'whom']));

  const client = await connectV1(stack.mcpUrl, token);
  try {
    // cancel_job is the gateway's job tool: an unknown job is its answer, nothing goes upstream.
    const cancel = await client.callTool({
      name: 'cancel_job',
      arguments: { jobId: randomUUID() },
    });
    expect(cancel.isError).toBe(true);
    const who = await client.callTool({ name: 'whoami', arguments: {} });
    expect(who.structuredContent).toMatchObject({ subject: 'alice', tenant: 'acme' });
  } finally {
    await client.close();
  }
  expect(fakes.jobs.calls).toEqual([]);
  expect(fakes.who.calls).toEqual([]);

  // Recorded for the console (read here as the console's own login), and counted.
  const pool = createPool({
    connectionString: consoleApp.databaseUrl,
    role: ROLES.console,
    max: 1,
  });
  try {
    const refused = await readUpstreamRefusals(pool);
    expect(refused.filter((r) => r.reason === 'reserved_name')).toEqual([
      expect.objectContaining({ upstream: 'jobs', upstreamName: 'job', name: 'cancel_job' }),
      expect.objectContaining({
        upstream: 'pack',
        upstreamName: 'report',
        name: 'generate_report',
      }),
      expect.objectContaining({ upstream: 'who', upstreamName: 'ami', name: 'whoami' }),
    ]);
  } finally {
    await pool.end();
  }
  const metrics = await (await fetch(`${stack.gatewayUrl}/metrics`)).text();
  expect(
    sample(metrics, 'mtg_upstream_tools_refused_total', {
      upstream: 'who',
      reason: 'reserved_name',
    }),
  ).toBeGreaterThanOrEqual(1);
  // An operator sees them on the console's queues page.
  const browser = await launchChromium();
  try {
    const context = await newContext(browser);
    const page = await logIn(context, consoleApp.url, 'operator', { sub: 'olga', tenant: 'acme' });
    await page.goto(`${consoleApp.url}/queues`);
    const shown = await page.locator('#upstream-refused-tools').innerText();
    expect(shown).toMatch(/who\s+ami\s+whoami\s+reserved_name/);
    expect(shown).toMatch(/many\s+t259\s+many\.t259\s+over_cap/);
  } finally {
    await browser.close();
  }
});

test('an upstream lists more than its maxTools: the first ones are served, the rest refused and counted', async () => {
  const { names } = await allToolNames();
  const many = names.filter((n) => n.startsWith('many.'));
  expect(many).toHaveLength(MANY_CAP);
  expect(many).not.toContain(`many.t${MANY - 1}`);
  const refused = await sql(
    stack.db.url,
    `SELECT upstream_name FROM app.upstream_refused_tools WHERE upstream = 'many' AND reason = 'over_cap'`,
  );
  expect(refused).toHaveLength(MANY - MANY_CAP);
  const metrics = await (await fetch(`${stack.gatewayUrl}/metrics`)).text();
  expect(
    sample(metrics, 'mtg_upstream_tools_refused_total', { upstream: 'many', reason: 'over_cap' }),
  ).toBeGreaterThanOrEqual(MANY - MANY_CAP);
});

test('a refused listing freezes nothing: that upstream and the others keep being relisted', async () => {
  fakes.good.setTools([{ name: 'ok' }, { name: 'added' }]);
  fakes.who.setTools([{ name: 'ami' }, { name: 'm' }, { name: 'mever' }]);
  const { names } = await pollUntil(
    () => allToolNames(),
    (r) => r.names.includes('good.added') && r.names.includes('whomever'),
    15_000,
  );
  expect(countOf(names, 'whoami')).toBe(1);
});

test('a change announced while its upstream is being listed is listed right after that listing', async () => {
  // The first change starts a listing that reads the tools and then waits; the second change
  // is announced during it, so that listing cannot hold it. Without one more listing it
  // would wait for the next refresh (refreshMs, 60 s).
  const listing = fakes.good.holdNextListing();
  fakes.good.setTools([{ name: 'ok' }, { name: 'added' }, { name: 'first' }]);
  await listing.held;
  fakes.good.setTools([{ name: 'ok' }, { name: 'added' }, { name: 'first' }, { name: 'second' }]);
  // Time for the announcement to reach the gateway while the listing still waits.
  await new Promise((r) => setTimeout(r, 500));
  listing.release();
  const { names } = await pollUntil(
    () => allToolNames(),
    (r) => r.names.includes('good.second'),
    8_000,
  );
  expect(names).toContain('good.first');
});

test('stale catalogue rows never stop the gateway from starting nor block another upstream', async () => {
  // Rows an older gateway could have stored: `whoami` for an upstream now down, and a name
  // of good's prefix held by an upstream since removed from the file.
  await fakes.who.close();
  await sql(
    stack.db.url,
    `INSERT INTO app.upstream_tools (upstream, name, upstream_name, input_schema, fingerprint)
     VALUES ('who', 'whoami', 'ami', '{"type":"object"}', 'stale-1'),
            ('gone', 'good.late', 'late', '{"type":"object"}', 'stale-2')
     ON CONFLICT (upstream, name) DO NOTHING`,
  );
  await stack.restartGateway();
  fakes.good.setTools([{ name: 'ok' }, { name: 'added' }, { name: 'late' }]);
  const { names } = await pollUntil(
    () => allToolNames(),
    (r) => r.names.includes('good.late'),
    15_000,
  );
  expect(countOf(names, 'whoami')).toBe(1);
  const owner = await sql(
    stack.db.url,
    `SELECT upstream FROM app.upstream_tools WHERE name = 'good.late'`,
  );
  expect(owner).toEqual([{ upstream: 'good' }]);
});

test('tools/list is paged on the 2025-11-25 and 2026-07-28 wires with an opaque cursor; a bad cursor is -32602', async () => {
  const v1 = await allToolNames();
  expect(v1.pages).toBeGreaterThan(2);
  expect(new Set(v1.names).size).toBe(v1.names.length);
  const first = await rpc2026(stack.mcpUrl, token, 'tools/list', {});
  expect(first.body.result.tools).toHaveLength(100);
  expect(typeof first.body.result.nextCursor).toBe('string');
  const modern: string[] = [];
  let page = first.body.result;
  for (let i = 0; i < 50; i++) {
    modern.push(...page.tools.map((t: { name: string }) => t.name));
    if (!page.nextCursor) break;
    page = (await rpc2026(stack.mcpUrl, token, 'tools/list', { cursor: page.nextCursor })).body
      .result;
  }
  expect(modern).toEqual(v1.names);

  const forged = Buffer.from(JSON.stringify({ v: 1, after: 5 })).toString('base64url');
  for (const cursor of ['not-a-cursor', forged]) {
    const bad = await rpc2026(stack.mcpUrl, token, 'tools/list', { cursor });
    expect(bad.body.error?.code).toBe(-32602);
    const client = await connectV1(stack.mcpUrl, token);
    try {
      const error = await client
        .request({ method: 'tools/list', params: { cursor } }, ListToolsResultSchema)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32602);
    } finally {
      await client.close();
    }
  }
});
