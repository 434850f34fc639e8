import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire, type Wire } from '../support/wires.ts';

// Revocation end to end: the dev IdP disables a user and pushes real SETs to the gateway, or
// a tenant administrator uses the admin API; running work stops, the user gets nothing, and
// enabling the user again lets new work start while the stopped work stays stopped.

const REVOKED = 'access for this principal has been revoked';
const PREDATES =
  'this token was issued before access for this principal was revoked; get a new token';

let stack: Stack;
let wire: Wire;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '300' } });
  wire = jobToolsWire(stack.mcpUrl);
});
afterAll(async () => {
  await stack?.close();
});

const taskRow = async (id: string) =>
  (
    await sql(
      stack.db.url,
      'SELECT status, outcome, status_message, ended_by, ended_at FROM app.tasks WHERE id = $1',
      [id],
    )
  )[0];

/** A bare MCP request with `token`: what any client would get from the gateway's HTTP layer. */
async function mcpPing(token: string) {
  const r = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  return {
    status: r.status,
    challenge: r.headers.get('www-authenticate'),
    body: (await r.json()) as any,
  };
}

async function admin(action: 'revoke' | 'restore', token: string, body: unknown) {
  const r = await fetch(`${stack.gatewayUrl}/admin/principals/${action}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: r.status,
    body: (await r.json()) as any,
    challenge: r.headers.get('www-authenticate'),
  };
}

/**
 * A token issued after the principal's last revocation: `iat` has whole seconds, and a token
 * of the revocation's own second counts as older than it.
 */
async function tokenAfterRevocation(sub: string, tenant: string) {
  const [{ revoked_at }] = await sql(
    stack.db.url,
    'SELECT revoked_at FROM app.principals WHERE tenant = $1 AND subject = $2',
    [tenant, sub],
  );
  const nextSecond = (Math.floor(revoked_at.getTime() / 1000) + 1) * 1000;
  await new Promise((r) => setTimeout(r, Math.max(0, nextSecond - Date.now())));
  return stack.token(sub, tenant);
}

const longRun = (collection: string) => ({ collection, count: 20_000, patch: { v: 1 } });

test('a user disabled mid-run at the IdP: the task stops within a step, the user is refused, and enabling lets them start again', async () => {
  const token = await stack.token('uma', 'acme');
  const taskId = await wire.start(token, 'bulk_update_records', longRun('revoke-ssf'));
  await pollUntil(
    () => stack.writes(taskId),
    (w) => w.length >= 2,
    15_000,
    50,
  );

  const disabledAt = Date.now();
  const answer = await stack.idpUser('disable', 'uma', 'acme');
  expect(answer.push.pushed && answer.push.deliveries.every((d) => d.status === 202)).toBe(true);

  const row = await pollUntil(
    () => taskRow(taskId),
    (r) => r.status !== 'working',
    10_000,
    20,
  );
  const stopMs = row.ended_at.getTime() - disabledAt;
  console.log(`idp:user disable → task ended: ${stopMs} ms (DEMO_STEP_MS=300)`);
  expect(stopMs).toBeLessThan(10_000);
  expect(row).toMatchObject({
    status: 'cancelled',
    outcome: 'revoked',
    ended_by: { path: 'revocation', via: 'ssf:account-disabled' },
  });
  expect(row.status_message).toContain('ssf:account-disabled');

  // No downstream write lands after the task stopped.
  const writes = await stack.writes(taskId);
  await new Promise((r) => setTimeout(r, 1000)); // more than three step lengths
  expect(await stack.writes(taskId)).toEqual(writes);
  expect(writes.every((w) => Date.parse(w.at) <= row.ended_at.getTime())).toBe(true);
  expect(writes.length).toBeLessThan(200);

  const audit = await sql(
    stack.db.url,
    `SELECT type, reason, task_id, body FROM audit.events
      WHERE tenant = 'acme' AND subject = 'uma' AND type IN ('principal.revoked', 'task.cancelled') ORDER BY seq`,
  );
  expect(audit.map((e) => [e.type, e.reason])).toEqual([
    ['principal.revoked', 'ssf:account-disabled'],
    ['task.cancelled', 'revoked'],
  ]);
  const revoked = JSON.parse(audit[0].body);
  expect(revoked.data).toMatchObject({
    openTasks: [taskId],
    iss: stack.issuer,
    jti: expect.any(String),
  });
  expect(audit[1].task_id).toBe(taskId);
  expect(JSON.parse(audit[1].body).data.note).toContain('ssf:account-disabled');

  // The same, still unexpired token gets nothing: no polling, no new work.
  const refused = await mcpPing(token);
  expect(refused.status).toBe(401);
  expect(refused.body).toEqual({ error: 'invalid_token', error_description: REVOKED });
  expect(refused.challenge).toContain('error="invalid_token"');
  expect((await wire.get(token, taskId)).ok).toBe(false);
  await expect(wire.start(token, 'generate_report', { report: 'while-revoked' })).rejects.toThrow();
  const denied = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE type = 'auth.denied' AND reason = 'principal_revoked' AND subject = 'uma'`,
  );
  expect(denied[0].n).toBeGreaterThanOrEqual(3);

  // Enabled again: a new token works, the stopped task stays stopped and says why.
  const enabled = await stack.idpUser('enable', 'uma', 'acme');
  expect(enabled.push.pushed && enabled.push.deliveries.map((d) => d.status)).toEqual([202]);
  const fresh = await tokenAfterRevocation('uma', 'acme');
  expect((await mcpPing(fresh)).status).toBe(200);
  // The token issued before the revocation stays refused (CAEP session-revoked), audited.
  expect(await mcpPing(token)).toMatchObject({
    status: 401,
    body: { error: 'invalid_token', error_description: PREDATES },
  });
  expect(
    await sql(
      stack.db.url,
      `SELECT count(*)::int AS n FROM audit.events WHERE type = 'auth.denied' AND reason = 'token_predates_revocation' AND subject = 'uma'`,
    ),
  ).toEqual([{ n: 1 }]);
  const status = await wire.get(fresh, taskId);
  expect(status).toMatchObject({
    ok: true,
    value: { status: 'cancelled', outcome: 'revoked', endedBy: { via: 'ssf:account-disabled' } },
  });
  expect((status as { value: { statusMessage: string } }).value.statusMessage).toContain(
    'ssf:account-disabled',
  );
  const again = await wire.start(fresh, 'generate_report', { report: 'after-enable', rows: 2 });
  const done = await pollUntil(
    () => wire.get(fresh, again),
    (a) => a.ok && a.value.status !== 'working',
    15_000,
  );
  expect(done).toMatchObject({ ok: true, value: { status: 'completed' } });
});

describe('admin API', () => {
  test('an acme admin revokes acme/bob: his open tasks stop (revoked, path admin), and he is refused', async () => {
    const adminToken = await stack.token('ada', 'acme', { scope: 'tasks:admin' });
    const bob = await stack.token('bob', 'acme');
    const taskId = await wire.start(bob, 'bulk_update_records', longRun('revoke-admin'));
    await pollUntil(
      () => stack.writes(taskId),
      (w) => w.length >= 1,
      15_000,
      50,
    );

    const r = await admin('revoke', adminToken, { subject: 'bob', reason: 'laptop stolen' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      subject: 'bob',
      tenant: 'acme',
      revoked: true,
      cancelledTasks: [taskId],
    });

    const row = await pollUntil(
      () => taskRow(taskId),
      (t) => t.status !== 'working',
      10_000,
      20,
    );
    expect(row).toMatchObject({
      status: 'cancelled',
      outcome: 'revoked',
      ended_by: { path: 'revocation', via: 'admin', subject: 'ada', client: 'mcp-agent' },
    });
    const [event] = await sql(
      stack.db.url,
      `SELECT reason, actor_subject, actor_kind, body FROM audit.events WHERE type = 'principal.revoked' AND tenant = 'acme' AND subject = 'bob'`,
    );
    expect(event).toMatchObject({ reason: 'admin', actor_subject: 'ada', actor_kind: 'admin' });
    expect(JSON.parse(event.body).data).toMatchObject({
      openTasks: [taskId],
      note: 'laptop stolen',
    });
    const [cancelled] = await sql(
      stack.db.url,
      `SELECT reason FROM audit.events WHERE type = 'task.cancelled' AND task_id = $1`,
      [taskId],
    );
    expect(cancelled).toEqual({ reason: 'revoked' });
    expect((await mcpPing(bob)).status).toBe(401);

    // The IdP enabling bob does not lift the gateway administrator's decision.
    await stack.idpUser('enable', 'bob', 'acme');
    expect((await mcpPing(bob)).status).toBe(401);

    const restored = await admin('restore', adminToken, { subject: 'bob' });
    expect(restored.body).toEqual({
      subject: 'bob',
      tenant: 'acme',
      revoked: false,
      restored: true,
      cancelledTasks: [],
    });
    // Restored: new tokens are served, the one from before the revocation is not.
    expect((await mcpPing(await tokenAfterRevocation('bob', 'acme'))).status).toBe(200);
    expect((await mcpPing(bob)).body).toEqual({
      error: 'invalid_token',
      error_description: PREDATES,
    });
    expect(await taskRow(taskId)).toMatchObject({ status: 'cancelled', outcome: 'revoked' });
  });

  test('a globex admin cannot touch acme users: naming bob revokes globex/bob, never acme/bob', async () => {
    const globexAdmin = await stack.token('gus', 'globex', { scope: 'tasks:admin' });
    const acmeBob = await stack.token('bob', 'acme');
    const globexBob = await stack.token('bob', 'globex');
    const acmeTask = await wire.start(acmeBob, 'bulk_update_records', longRun('acme-bob'));
    const globexTask = await wire.start(globexBob, 'bulk_update_records', longRun('globex-bob'));

    // A body cannot name a tenant: it is always the administrator's own.
    const withTenant = await admin('revoke', globexAdmin, { subject: 'bob', tenant: 'acme' });
    expect(withTenant.status).toBe(400);
    expect(withTenant.body.error).toBe('invalid_request');

    const r = await admin('revoke', globexAdmin, { subject: 'bob' });
    expect(r.body).toEqual({
      subject: 'bob',
      tenant: 'globex',
      revoked: true,
      cancelledTasks: [globexTask],
    });
    await pollUntil(
      () => taskRow(globexTask),
      (t) => t.status !== 'working',
      10_000,
      20,
    );
    expect(await taskRow(globexTask)).toMatchObject({ status: 'cancelled', outcome: 'revoked' });

    // acme/bob is untouched: still working, still served.
    expect(await taskRow(acmeTask)).toMatchObject({ status: 'working' });
    expect((await mcpPing(acmeBob)).status).toBe(200);
    expect(
      await sql(
        stack.db.url,
        `SELECT revoked FROM app.principals WHERE tenant = 'acme' AND subject = 'bob'`,
      ),
    ).toEqual([{ revoked: false }]);
    expect((await mcpPing(globexBob)).status).toBe(401);
    await wire.cancel(acmeBob, acmeTask);
  });

  test('without tasks:admin the admin API answers 403 insufficient_scope and changes nothing', async () => {
    const plain = await stack.token('pat', 'acme');
    for (const action of ['revoke', 'restore'] as const) {
      const r = await admin(action, plain, { subject: 'carl' });
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ error: 'insufficient_scope', scope: 'tasks:admin' });
      expect(r.challenge).toContain('error="insufficient_scope"');
    }
    expect(await sql(stack.db.url, `SELECT * FROM app.principals WHERE subject = 'carl'`)).toEqual(
      [],
    );
    const denied = await sql(
      stack.db.url,
      `SELECT reason FROM audit.events WHERE type = 'auth.denied' AND subject = 'pat'`,
    );
    expect(denied).toEqual([{ reason: 'insufficient_scope' }, { reason: 'insufficient_scope' }]);

    // And without any token, the usual bearer challenge.
    const anonymous = await fetch(`${stack.gatewayUrl}/admin/principals/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ subject: 'carl' }),
    });
    expect(anonymous.status).toBe(401);
  });
});
