// Two cells on this machine, each with a PostgreSQL cluster of its own (the test cluster, and
// a second one made with initdb on another loopback port), its own gateway and worker; one
// dev IdP; the edge router (apps/cell-router) in front, the only URL clients get. Through it,
// with the MCP SDK clients: a tenant's tasks are created, run and polled in its cell alone;
// another cell's task id is denied exactly as a missing one; each cell's audit chains verify
// on their own; a revocation pushed by the IdP reaches every cell and stops the user's
// running work wherever it is; a tenant with no cell, and a token the router cannot verify,
// are refused at the edge (docs/scaling.md, "Past one primary").
import { Writable } from 'node:stream';
import pg from 'pg';
import winston from 'winston';
import { verifyAuditTrail } from '@mtg/audit';
import { newTaskId } from '@mtg/tasks';
import { startCells, type CellsDeployment } from '../support/cells.ts';
import { connectV2 } from '../support/clients.ts';
import { adminDatabaseUrl } from '../support/database.ts';
import {
  devIdpSigningKey,
  generateForeignKey,
  signToken,
  userClaims,
} from '../support/forge-token.ts';
import { standbyTools, startOwnPrimary, type PgServer } from '../support/hot-standby.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { coreWire, extWire, jobToolsWire, type Answer } from '../support/wires.ts';

const tools = await standbyTools();
const skipped = 'missing' in tools ? tools.missing : undefined;
if (skipped) process.stderr.write(`\ncells tests skipped: ${skipped}\n`);
const suite = skipped ? describe.skip : describe;

/** Every line the router logs, as JSON (to check what it routed, and that it logs no token). */
const routerLines: Array<Record<string, unknown>> = [];
const routerLogger = winston.createLogger({
  level: 'info',
  format: winston.format.json(),
  transports: [
    new winston.transports.Stream({
      stream: new Writable({
        write(chunk, _enc, done) {
          for (const line of String(chunk).split('\n').filter(Boolean))
            routerLines.push(JSON.parse(line));
          done();
        },
      }),
    }),
  ],
});

let clusterB: PgServer;
let deployment: CellsDeployment;
let alice: string; // acme → cell a
let bob: string; // globex → cell b

const taskIn = async (cell: 'a' | 'b', id: string) =>
  (
    await sql(
      deployment.cells[cell]!.db.url,
      'SELECT tenant, status FROM app.tasks WHERE id = $1',
      [id],
    )
  )[0] as { tenant: string; status: string } | undefined;

/** The same answer with the task id taken out (a denial may name the id it was asked for). */
const withoutId = (answer: Answer, id: string) =>
  JSON.parse(JSON.stringify(answer).replaceAll(id, 'ID'));

suite('cells: tenants spread over two PostgreSQL clusters behind the edge router', () => {
  beforeAll(async () => {
    if ('missing' in tools) return;
    clusterB = await startOwnPrimary(tools);
    deployment = await startCells({
      servers: { a: adminDatabaseUrl(), b: clusterB.url },
      tenants: { acme: 'a', globex: 'b' },
      env: { DEMO_STEP_MS: '300' },
      logger: winston.createLogger({
        silent: !process.env.TEST_LOGS,
        transports: [new winston.transports.Console()],
      }),
      routerLogger,
    });
    alice = await deployment.token('alice', 'acme');
    bob = await deployment.token('bob', 'globex');
  }, 120_000);

  afterAll(async () => {
    await deployment?.close();
    await clusterB?.stop();
  });

  test('the two cells are two PostgreSQL servers', async () => {
    const [a] = await sql(
      deployment.cells.a!.db.url,
      'SELECT inet_server_port() AS port, system_identifier::text AS id FROM pg_control_system()',
    );
    const [b] = await sql(
      deployment.cells.b!.db.url,
      'SELECT inet_server_port() AS port, system_identifier::text AS id FROM pg_control_system()',
    );
    expect(a.port).not.toBe(b.port);
    expect(a.id).not.toBe(b.id);
  });

  test('clients see one resource: the router answers discovery and the 401 as a gateway does', async () => {
    const metadata = await fetch(
      `${deployment.routerUrl}/.well-known/oauth-protected-resource/mcp`,
    );
    expect(metadata.status).toBe(200);
    expect(await metadata.json()).toMatchObject({
      resource: deployment.mcpUrl,
      authorization_servers: [deployment.issuer],
    });
    const ping = (url: string, headers: Record<string, string> = {}) =>
      fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
    const atRouter = await ping(deployment.mcpUrl);
    const atCell = await ping(`${deployment.cells.a!.url}/mcp`);
    expect(atRouter.status).toBe(401);
    expect(atRouter.headers.get('www-authenticate')).toBe(atCell.headers.get('www-authenticate'));
    expect(atRouter.headers.get('www-authenticate')).toContain(
      `resource_metadata="${deployment.routerUrl}/.well-known/oauth-protected-resource/mcp"`,
    );
    expect(await atRouter.json()).toEqual(await atCell.json());
    // Health: the cells file loaded, the keys too, both cells reachable.
    expect(await (await fetch(`${deployment.routerUrl}/healthz`)).json()).toEqual({ ok: true });
    const ready = await fetch(`${deployment.routerUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ok: true, cells: { a: true, b: true } });
  });

  test("a real 2026-07-28 client through the router reaches its own tenant's cell", async () => {
    for (const [token, tenant] of [
      [alice, 'acme'],
      [bob, 'globex'],
    ] as const) {
      const client = await connectV2(deployment.mcpUrl, token);
      try {
        const me = await client.callTool({ name: 'whoami', arguments: {} });
        expect(me.structuredContent).toMatchObject({ tenant });
      } finally {
        await client.close();
      }
    }
  });

  let taskA: string;
  let taskB: string;

  test("each tenant's tasks are created, run and polled in its cell only", async () => {
    const wire = coreWire(deployment.mcpUrl);
    taskA = await wire.start(alice, 'generate_report', { report: 'acme-q3', rows: 2 });
    taskB = await wire.start(bob, 'generate_report', { report: 'globex-q3', rows: 2 });
    for (const [token, id] of [
      [alice, taskA],
      [bob, taskB],
    ] as const) {
      const done = await pollUntil(
        () => wire.get(token, id),
        (a) => a.ok && a.value.status !== 'working',
      );
      expect(done).toMatchObject({ ok: true, value: { status: 'completed' } });
      expect(await wire.result(token, id)).toMatchObject({ ok: true });
    }
    expect(await taskIn('a', taskA)).toEqual({ tenant: 'acme', status: 'completed' });
    expect(await taskIn('b', taskA)).toBeUndefined();
    expect(await taskIn('b', taskB)).toEqual({ tenant: 'globex', status: 'completed' });
    expect(await taskIn('a', taskB)).toBeUndefined();
    // Nothing of a tenant in the other cell: no task, no job, no audit event.
    for (const [cell, other] of [
      ['a', 'globex'],
      ['b', 'acme'],
    ] as const) {
      const url = deployment.cells[cell]!.db.url;
      expect(
        await sql(url, 'SELECT count(*)::int AS n FROM app.tasks WHERE tenant = $1', [other]),
      ).toEqual([{ n: 0 }]);
      expect(
        await sql(url, 'SELECT count(*)::int AS n FROM audit.events WHERE tenant = $1', [other]),
      ).toEqual([{ n: 0 }]);
    }
    const own = (cell: 'a' | 'b', tenant: string) =>
      sql(
        deployment.cells[cell]!.db.url,
        `SELECT count(*)::int AS n FROM audit.events WHERE tenant = $1 AND type = 'task.completed'`,
        [tenant],
      );
    expect(await own('a', 'acme')).toEqual([{ n: 1 }]);
    expect(await own('b', 'globex')).toEqual([{ n: 1 }]);
    // The router logged where each request went, and no token.
    expect(
      routerLines.some((l) => l.message === 'request' && l.tenant === 'acme' && l.cell === 'a'),
    ).toBe(true);
    expect(
      routerLines.some((l) => l.message === 'request' && l.tenant === 'globex' && l.cell === 'b'),
    ).toBe(true);
    expect(
      routerLines.some((l) => l.message === 'request' && l.tenant === 'acme' && l.cell === 'b'),
    ).toBe(false);
    expect(JSON.stringify(routerLines)).not.toMatch(/eyJ[A-Za-z0-9_-]{5,}\./);
  });

  test("another cell's task id is denied exactly as a missing one, on every wire; its owner is answered", async () => {
    for (const wire of [
      coreWire(deployment.mcpUrl),
      extWire(deployment.mcpUrl),
      jobToolsWire(deployment.mcpUrl),
    ]) {
      const missing = newTaskId();
      const foreign = await wire.get(bob, taskA);
      expect(foreign.ok).toBe(false);
      expect(withoutId(foreign, taskA)).toEqual(withoutId(await wire.get(bob, missing), missing));
      const cancel = await wire.cancel(bob, taskA);
      expect(cancel.ok).toBe(false);
      expect(withoutId(cancel, taskA)).toEqual(withoutId(await wire.cancel(bob, missing), missing));
      expect(await wire.get(alice, taskA)).toMatchObject({ ok: true });
      expect(await wire.get(alice, taskB)).toMatchObject({ ok: false });
    }
    const listed = await jobToolsWire(deployment.mcpUrl).list(bob);
    expect(listed).toEqual([taskB]);
  });

  test("each cell's audit chains verify on their own, one per tenant it serves", async () => {
    for (const [cell, tenant] of [
      ['a', 'acme'],
      ['b', 'globex'],
    ] as const) {
      const client = new pg.Client({ connectionString: deployment.cells[cell]!.db.url });
      await client.connect();
      try {
        const all = await verifyAuditTrail(client);
        expect(all).toMatchObject({ ok: true });
        const own = await verifyAuditTrail(client, { tenant });
        expect(own).toMatchObject({ ok: true });
        expect(own.events).toBeGreaterThan(0);
        const tenants = (
          await client.query(`SELECT DISTINCT tenant FROM audit.events WHERE tenant IS NOT NULL`)
        ).rows.map((r) => r.tenant);
        expect(tenants).toEqual([tenant]);
      } finally {
        await client.end();
      }
    }
  });

  test("a revocation from the IdP reaches both cells and stops the user's running work in its cell", async () => {
    const wire = jobToolsWire(deployment.mcpUrl);
    const longRun = { collection: 'c', count: 20_000, patch: { v: 1 } };
    const runningA = await wire.start(alice, 'bulk_update_records', longRun);
    const runningB = await wire.start(bob, 'bulk_update_records', longRun);
    for (const [cell, id] of [
      ['a', runningA],
      ['b', runningB],
    ] as const)
      await pollUntil(
        () =>
          sql(deployment.cells[cell]!.db.url, 'SELECT lease_owner FROM app.tasks WHERE id = $1', [
            id,
          ]),
        (rows) => Boolean(rows[0]?.lease_owner),
      );

    for (const [sub, tenant] of [
      ['alice', 'acme'],
      ['bob', 'globex'],
    ] as const) {
      const answer = await deployment.idpUser('disable', sub, tenant);
      // One push to the router, accepted only once every cell accepted it.
      expect(answer.push).toMatchObject({
        pushed: true,
        url: `${deployment.routerUrl}/ssf/events`,
      });
      if (!answer.push.pushed) throw new Error('not pushed');
      expect(answer.push.deliveries.length).toBeGreaterThan(0);
      for (const d of answer.push.deliveries)
        expect(d).toMatchObject({ delivered: true, status: 202 });
    }
    // The revocation list is global: each cell holds both revocations.
    for (const cell of ['a', 'b'] as const)
      expect(
        await sql(
          deployment.cells[cell]!.db.url,
          `SELECT tenant, subject, revoked FROM app.principals ORDER BY tenant`,
        ),
      ).toEqual([
        { tenant: 'acme', subject: 'alice', revoked: true },
        { tenant: 'globex', subject: 'bob', revoked: true },
      ]);
    // And the running work stopped, each in its own cell.
    for (const [cell, id] of [
      ['a', runningA],
      ['b', runningB],
    ] as const) {
      const row = await pollUntil(
        () =>
          sql(
            deployment.cells[cell]!.db.url,
            'SELECT status, outcome FROM app.tasks WHERE id = $1',
            [id],
          ),
        (rows) => rows[0]?.status === 'cancelled',
      );
      expect(row[0]).toEqual({ status: 'cancelled', outcome: 'revoked' });
    }
    // The old tokens are refused (by the cell: the router only verifies the token itself).
    expect(await wire.get(alice, runningA)).toMatchObject({ ok: false });
    for (const [sub, tenant] of [
      ['alice', 'acme'],
      ['bob', 'globex'],
    ] as const)
      await deployment.idpUser('enable', sub, tenant);
  });

  const mcpPing = (token: string) =>
    fetch(deployment.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });

  test('a tenant no cell serves (and no default) is refused with 403 at the router', async () => {
    const before = routerLines.length;
    const r = await mcpPing(await deployment.token('ivan', 'initech'));
    expect(r.status).toBe(403);
    expect(await r.json()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Forbidden: no cell serves this tenant' },
    });
    const line = routerLines.slice(before).find((l) => l.message === 'request');
    expect(line).toMatchObject({ status: 403, tenant: 'initech' });
    expect(line!.cell).toBeUndefined();
    for (const cell of ['a', 'b'] as const)
      expect(
        await sql(
          deployment.cells[cell]!.db.url,
          `SELECT count(*)::int AS n FROM audit.events WHERE tenant = 'initech'`,
        ),
      ).toEqual([{ n: 0 }]);
  });

  test('a forged or foreign token picks no cell: 401 at the router', async () => {
    const claims = userClaims({
      issuer: deployment.issuer,
      audience: deployment.mcpUrl,
      sub: 'mallory',
      tenant: 'globex',
    });
    const forged = await signToken(claims, await generateForeignKey());
    // Signed by the real IdP key, but for a cell's own URL: not this resource.
    const elsewhere = await signToken(
      { ...claims, aud: `${deployment.cells.b!.url}/mcp` },
      await devIdpSigningKey(deployment.issuer),
    );
    for (const [token, description] of [
      [forged, 'no known key matches the token'],
      [elsewhere, 'the token audience is not this resource'],
      ['not.a.jwt', 'the access token header is not valid JSON'],
    ] as const) {
      const before = routerLines.length;
      const r = await mcpPing(token);
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe(
        `Bearer error="invalid_token", error_description="${description}", resource_metadata="${deployment.routerUrl}/.well-known/oauth-protected-resource/mcp"`,
      );
      const line = routerLines.slice(before).find((l) => l.message === 'request');
      expect(line).toMatchObject({ status: 401 });
      expect(line!.cell).toBeUndefined();
    }
    expect(JSON.stringify(routerLines)).not.toContain(forged);
  });
});
