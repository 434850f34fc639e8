// Console sessions in PostgreSQL: a login at one console replica is a session at another on
// the same database (and after a restart); logout ends it for both; an expired or idle
// session is refused and purged; the table holds neither the cookie's id nor, in clear,
// what the session carries. Logins go through the dev IdP's form in headless Chromium.
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Browser } from 'playwright-core';
import { launchChromium, logIn, newContext } from '../support/browser.ts';
import { startConsole, type TestConsole } from '../support/console.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
let browser: Browser;
const key = randomBytes(32);
const started: TestConsole[] = [];
let a: TestConsole;
let b: TestConsole;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  a = await startConsole(stack, { sessionKey: key, name: 'console_a' });
  b = await startConsole(stack, { sessionKey: key, name: 'console_b' });
  started.push(a, b);
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  for (const c of started) await c.close().catch(() => {});
  await stack?.close();
});

/** Logs in at `at` through the browser; returns the session cookie's value. */
async function loginAt(at: TestConsole, sub: string): Promise<string> {
  const context = await newContext(browser);
  try {
    await logIn(context, at.url, 'auditor', { sub, tenant: 'acme' });
    const cookie = (await context.cookies()).find((c) => c.name === 'mtg_console');
    if (!cookie) throw new Error('no session cookie after login');
    return cookie.value;
  } finally {
    await context.close();
  }
}

/** A page of `at` with the cookie: its status and text (redirects not followed). */
async function pageOf(at: TestConsole, id: string, path = '/tasks') {
  const r = await fetch(`${at.url}${path}`, {
    headers: { cookie: `mtg_console=${id}` },
    redirect: 'manual',
  });
  return { status: r.status, location: r.headers.get('location'), text: await r.text() };
}

const csrfIn = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1];

test('a session opened at one console is accepted by another on the same database, and by a restarted one', async () => {
  const id = await loginAt(a, 'ada');
  const atA = await pageOf(a, id);
  const atB = await pageOf(b, id);
  expect(atA.status).toBe(200);
  expect(atB.status).toBe(200);
  expect(atB.text).toContain('ada · acme · <b>auditor</b>');
  // The same CSRF token on both: it is part of the shared session, not of the process.
  expect(csrfIn(atB.text)).toBeDefined();
  expect(csrfIn(atB.text)).toBe(csrfIn(atA.text));

  // A restart (a new process with the same key) keeps it.
  await a.close();
  started.splice(started.indexOf(a), 1);
  a = await startConsole(stack, { sessionKey: key, name: 'console_a2' });
  started.push(a);
  expect((await pageOf(a, id)).status).toBe(200);

  // A console with another key has no way to open the row: no session there.
  const other = await startConsole(stack, { sessionKey: randomBytes(32), name: 'console_x' });
  started.push(other);
  const there = await pageOf(other, id);
  expect(there.status).toBe(303);
  expect(there.location).toBe('/login');
}, 120_000);

test('the session cookie is found among other cookies, also in the quoted form RFC 6265 allows', async () => {
  const id = await loginAt(a, 'cookie-reader');
  for (const header of [
    `theme=dark; mtg_console=${id}; lang=en`,
    `theme="a b"; mtg_console="${id}"`,
    `mtg_console=${encodeURIComponent(id)};other=1`,
  ]) {
    const r = await fetch(`${a.url}/tasks`, { headers: { cookie: header }, redirect: 'manual' });
    expect({ header, status: r.status }).toEqual({ header, status: 200 });
  }
  // Another cookie whose name merely ends like it is not the session.
  const r = await fetch(`${a.url}/tasks`, {
    headers: { cookie: `xmtg_console=${id}` },
    redirect: 'manual',
  });
  expect(r.status).toBe(303);
});

test('the table stores a hash of the session id, and nothing of the session in clear', async () => {
  const id = await loginAt(a, 'bea');
  const rows = await sql(
    stack.db.url,
    `SELECT row_to_json(s)::text AS json, encode(ciphertext, 'escape') AS clear, id_hash, kind
       FROM app.console_sessions s`,
  );
  const mine = rows.filter((r) =>
    (r.id_hash as Buffer).equals(createHash('sha256').update(id).digest()),
  );
  expect(mine).toHaveLength(1);
  expect(mine[0].kind).toBe('principal');
  for (const row of rows) {
    // Neither the id, nor its bytes, nor the person or the token's claims in clear.
    expect(row.json).not.toContain(id);
    expect(row.json).not.toContain(Buffer.from(id, 'base64url').toString('hex'));
    expect(row.clear).not.toMatch(/bea|acme|auditor|eyJ/);
  }
  // A row moved under another id does not open: the sealed content is bound to its hash.
  const victim = await loginAt(a, 'cy');
  await sql(
    stack.db.url,
    `UPDATE app.console_sessions t SET key_id = s.key_id, iv = s.iv, ciphertext = s.ciphertext,
            tag = s.tag
       FROM app.console_sessions s WHERE t.id_hash = $1 AND s.id_hash = $2`,
    [createHash('sha256').update(victim).digest(), createHash('sha256').update(id).digest()],
  );
  expect((await pageOf(b, victim)).status).toBe(303);
  expect((await pageOf(b, id)).status).toBe(200);
}, 120_000);

test('logout at one console ends the session at every console', async () => {
  const id = await loginAt(a, 'dan');
  const page = await pageOf(b, id);
  expect(page.status).toBe(200);
  const out = await fetch(`${b.url}/logout`, {
    method: 'POST',
    headers: { cookie: `mtg_console=${id}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf: csrfIn(page.text)! }),
    redirect: 'manual',
  });
  expect(out.status).toBe(303);
  for (const at of [a, b]) {
    const after = await pageOf(at, id);
    expect(after.status).toBe(303);
    expect(after.location).toBe('/login');
  }
  const left = await sql(stack.db.url, `SELECT 1 FROM app.console_sessions WHERE id_hash = $1`, [
    createHash('sha256').update(id).digest(),
  ]);
  expect(left).toHaveLength(0);
}, 120_000);

test('an expired or idle session is refused, and the next login purges it', async () => {
  const expired = await loginAt(a, 'eve');
  const idle = await loginAt(a, 'fay');
  const hash = (id: string) => createHash('sha256').update(id).digest();
  expect((await pageOf(b, expired)).status).toBe(200);
  expect((await pageOf(b, idle)).status).toBe(200);
  // Move the rows in time, as the database's clock would: past the token's expiry, and past
  // the idle timeout (30 minutes by default) without a request.
  await sql(
    stack.db.url,
    `UPDATE app.console_sessions SET expires_at = now() - interval '1 second' WHERE id_hash = $1`,
    [hash(expired)],
  );
  await sql(
    stack.db.url,
    `UPDATE app.console_sessions SET last_seen_at = now() - interval '31 minutes'
      WHERE id_hash = $1`,
    [hash(idle)],
  );
  for (const id of [expired, idle]) {
    for (const at of [a, b]) {
      const r = await pageOf(at, id);
      expect(r.status).toBe(303);
      expect(r.location).toBe('/login');
    }
  }
  // Any login start purges ended sessions.
  await loginAt(b, 'gus');
  const rows = await sql(
    stack.db.url,
    `SELECT 1 FROM app.console_sessions WHERE id_hash = ANY ($1)`,
    [[hash(expired), hash(idle)]],
  );
  expect(rows).toHaveLength(0);
}, 120_000);

test("the console's role reads the audit views, its sessions, the queues summaries and who is revoked, and nothing else", async () => {
  const client = new pg.Client({ connectionString: a.databaseUrl });
  await client.connect();
  try {
    await client.query('SET ROLE mtg_console');
    const code = (text: string) =>
      client.query(text).then(
        () => 'ok',
        (error: { code?: string }) => error.code,
      );
    expect(await code('SELECT count(*) FROM audit.denials')).toBe('ok');
    expect(await code('SELECT count(*) FROM app.console_queue_depth')).toBe('ok');
    expect(await code('SELECT count(*) FROM app.console_workers')).toBe('ok');
    expect(await code('SELECT count(*) FROM app.console_sessions')).toBe('ok');
    // Whether a principal is revoked, and since when (its sessions end): not by whom or why.
    expect(await code('SELECT tenant, subject, revoked, revoked_at FROM app.principals')).toBe(
      'ok',
    );
    expect(await code('SELECT revoked_by FROM app.principals')).toBe('42501');
    expect(await code(`UPDATE app.principals SET revoked = false`)).toBe('42501');
    // No task row, no credential, no worker registration, no audit write.
    expect(await code('SELECT count(*) FROM app.tasks')).toBe('42501');
    expect(await code('SELECT count(*) FROM app.workers')).toBe('42501');
    expect(await code('SELECT count(*) FROM app.task_credentials')).toBe('42501');
    expect(await code(`DELETE FROM app.workers`)).toBe('42501');
    expect(await code('SELECT count(*) FROM audit.events')).toBe('42501');
    // Nor does mtg_auditor (the audit CLI's role) get the console's sessions.
    await client.query('RESET ROLE');
    await client.query('SET ROLE mtg_auditor');
    expect(await code('SELECT count(*) FROM app.console_sessions')).toBe('42501');
  } finally {
    await client.end();
  }
});
