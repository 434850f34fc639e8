// How a console session begins and ends, over HTTP against a whole test stack (the dev IdP's
// login form posted as a browser would): a principal the gateway revokes — through the IdP's
// Shared Signals or its admin API — loses every console session on its next request and
// cannot log in; a plain link to /login/start does not replace a live session; an action's
// notice comes from the session, never from the URL.
import { startConsole, type TestConsole } from '../support/console.ts';
import { csrfIn, CookieJar, follow, logInOverHttp, send } from '../support/console-http.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
let console_: TestConsole;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  console_ = await startConsole(stack);
}, 120_000);
afterAll(async () => {
  await console_?.close();
  await stack?.close();
});

const SESSION = 'mtg_console';
const month = new Date().toISOString().slice(0, 7);

async function loggedIn(role: 'auditor' | 'operator' | 'user', sub: string, tenant = 'acme') {
  const { jar, answer } = await logInOverHttp(console_.url, role, { sub, tenant });
  expect(answer.status).toBe(200);
  expect(answer.url).toBe(`${console_.url}/tasks`);
  return jar;
}

async function sessionRows(): Promise<number> {
  const rows = await sql(stack.db.url, `SELECT count(*)::int AS n FROM app.console_sessions`);
  return rows[0].n as number;
}

async function adminAction(action: 'revoke' | 'restore', subject: string) {
  const token = await stack.token('root', 'acme', { scope: 'tasks:admin' });
  const r = await fetch(`${stack.gatewayUrl}/admin/principals/${action}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ subject, reason: 'test' }),
  });
  expect(r.status).toBe(200);
}

describe('revocation reaches the console', () => {
  test('a user disabled at the IdP loses their live session: no denials, no evidence', async () => {
    const jar = await loggedIn('auditor', 'ivy');
    const other = await loggedIn('auditor', 'ivy');
    expect((await send(jar, `${console_.url}/denials`)).status).toBe(200);
    const rowsBefore = await sessionRows();

    const answer = await stack.idpUser('disable', 'ivy', 'acme');
    expect(answer.push.pushed && answer.push.deliveries.every((d) => d.delivered)).toBe(true);
    await pollUntil(
      () => sql(stack.db.url, `SELECT revoked FROM app.principals WHERE subject = 'ivy'`),
      (rows) => rows[0]?.revoked === true,
      10_000,
      100,
      'the gateway records the revocation',
    );

    const denials = await send(jar, `${console_.url}/denials`);
    expect(denials.status).toBe(403);
    expect(denials.text).toContain('data-code="principal_revoked"');
    expect(denials.text).not.toContain('<table');
    // The session is over in the database: the cookie is worth nothing anymore.
    const evidence = await send(jar, `${console_.url}/evidence?download=1&month=${month}`);
    expect(evidence.status).toBe(303);
    expect(evidence.location).toBe('/login');
    // Every session of the person ends, each on its first request.
    const second = await send(other, `${console_.url}/evidence?download=1&month=${month}`);
    expect(second.status).toBe(403);
    expect(second.text).not.toContain('"format"');
    expect(await sessionRows()).toBe(rowsBefore - 2);
  }, 60_000);

  test('a principal revoked through the admin API loses its session and cannot log in afresh', async () => {
    const jar = await loggedIn('auditor', 'jon');
    expect((await send(jar, `${console_.url}/evidence?download=1&month=${month}`)).status).toBe(
      200,
    );
    await adminAction('revoke', 'jon');

    const evidence = await send(jar, `${console_.url}/evidence?download=1&month=${month}`);
    expect(evidence.status).toBe(403);
    expect(evidence.text).toContain('data-code="principal_revoked"');

    // The IdP still issues jon a token (the administrator revoked at the gateway, not at the
    // IdP); the console refuses it as the gateway would.
    const again = await logInOverHttp(console_.url, 'auditor', { sub: 'jon', tenant: 'acme' });
    expect(again.answer.url).toMatch(/\/auth\/callback/);
    expect(again.answer.status).toBe(403);
    expect(again.answer.text).toContain('principal_revoked');
    expect((await send(again.jar, `${console_.url}/denials`)).status).toBe(303);

    // Restored, jon logs in again with a token issued after the revocation.
    await adminAction('restore', 'jon');
    const restored = await pollUntil(
      () => logInOverHttp(console_.url, 'auditor', { sub: 'jon', tenant: 'acme' }),
      (r) => r.answer.status === 200,
      5_000,
      200,
      'a login after the restore (a token of a later second)',
    );
    expect((await send(restored.jar, `${console_.url}/denials`)).status).toBe(200);
  }, 60_000);
});

describe('starting a login', () => {
  test('a plain link to /login/start keeps a live session; the confirmed login ends it', async () => {
    const jar = await loggedIn('user', 'kim');
    const before = jar.get(console_.url, SESSION)!;

    const link = await send(jar, `${console_.url}/login/start?role=auditor`);
    expect(link.status).toBe(200);
    expect(link.text).toContain('id="login-again"');
    expect(jar.get(console_.url, SESSION)).toBe(before);
    expect((await send(jar, `${console_.url}/tasks`)).status).toBe(200);

    // The confirm form needs this session's CSRF token: a forged POST is refused.
    const forged = await send(jar, `${console_.url}/login/start`, { form: { role: 'auditor' } });
    expect(forged.status).toBe(403);
    expect(jar.get(console_.url, SESSION)).toBe(before);

    const confirmed = await send(jar, `${console_.url}/login/start`, {
      form: { role: 'auditor', csrf: csrfIn(link.text)! },
    });
    expect(confirmed.status).toBe(303);
    expect(jar.get(console_.url, SESSION)).not.toBe(before);
    // The old session ended server-side, not just in this browser.
    const old = new CookieJar();
    old.set(console_.url, SESSION, before);
    expect((await send(old, `${console_.url}/tasks`)).status).toBe(303);

    const done = await follow(jar, confirmed, { sub: 'kim', tenant: 'acme' });
    expect(done.status).toBe(200);
    expect(done.text).toContain('kim · acme · <b>auditor</b>');
  }, 60_000);
});

describe('notices', () => {
  test("text in ?done= or ?failed= is never shown; an action's own outcome is, once", async () => {
    const jar = await loggedIn('operator', 'root');
    const lure = 'Session expired. Re-enter your password at https://evil.example/login';
    for (const q of ['done', 'failed']) {
      const page = await send(
        jar,
        `${console_.url}/principals?sub=lee&${q}=${encodeURIComponent(lure)}`,
      );
      expect(page.status).toBe(200);
      expect(page.text).not.toContain('evil.example');
      expect(page.text).not.toContain('id="action-result"');
    }
    const form = await send(jar, `${console_.url}/principals?sub=lee`);
    const revoked = await send(jar, `${console_.url}/principals/revoke`, {
      form: { csrf: csrfIn(form.text)!, subject: 'lee', reason: 'test' },
    });
    expect(revoked.status).toBe(303);
    expect(revoked.location).toBe('/principals?sub=lee');
    const shown = await send(jar, `${console_.url}${revoked.location}`);
    expect(shown.text).toMatch(/<p class="ok" id="action-result">[^<]*lee/);
    // Shown once: the next page has no notice.
    const again = await send(jar, `${console_.url}${revoked.location}`);
    expect(again.text).not.toContain('id="action-result"');
  }, 60_000);
});
