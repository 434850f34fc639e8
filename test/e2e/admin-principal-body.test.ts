import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 0 });
});
afterAll(async () => {
  await stack?.close();
});

async function admin(action: 'revoke' | 'restore', token: string, body: unknown) {
  const r = await fetch(`${stack.gatewayUrl}/admin/principals/${action}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as any };
}

test('a blank or whitespace-only subject (or reason) is refused with 400 naming the field, and nothing is revoked', async () => {
  const token = await stack.token('ada', 'acme', { scope: 'tasks:admin' });
  for (const action of ['revoke', 'restore'] as const) {
    for (const body of [
      { subject: ' ' },
      { subject: '\t\n ' },
      { subject: '' },
      { subject: 'bob', reason: '   ' },
    ]) {
      const r = await admin(action, token, body);
      expect([action, body, r.status]).toEqual([action, body, 400]);
      expect(r.body.error).toBe('invalid_request');
      expect(r.body.error_description).toMatch(/^(subject|reason): /);
    }
  }
  expect(await sql(stack.db.url, `SELECT subject FROM app.principals WHERE revoked`)).toEqual([]);
  // A subject with text in it is still served.
  expect((await admin('revoke', token, { subject: 'bob' })).status).toBe(200);
});
