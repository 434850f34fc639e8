// What the console's pages say, over HTTP against a whole test stack: a refusal names the role
// with its article; the Evidence page offers the month under way; a denial links the task it
// names; the Revocations page and its exports keep the reason the operator typed.
import { logInOverHttp, send, type CookieJar } from '../support/console-http.ts';
import { startConsole, type TestConsole } from '../support/console.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { extWire } from '../support/wires.ts';

let stack: Stack;
let console_: TestConsole;
let taskId: string;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  console_ = await startConsole(stack);
  const wire = extWire(stack.mcpUrl);
  taskId = await wire.start(await stack.token('alice', 'acme'), 'generate_report', {
    report: 'pages',
  });
  // mallory of acme asks for alice's task: a denial that names it.
  await wire.get(await stack.token('mallory', 'acme'), taskId);
}, 120_000);
afterAll(async () => {
  await console_?.close();
  await stack?.close();
});

async function as(role: 'auditor' | 'operator' | 'user', sub: string) {
  const { jar, answer } = await logInOverHttp(console_.url, role, { sub, tenant: 'acme' });
  expect(answer.status).toBe(200);
  return {
    jar,
    get: (path: string) => send(jar, `${console_.url}${path}`),
  };
}

test('a page refused for the role names the role with the right article', async () => {
  const auditor = await as('auditor', 'ann');
  const refused = await auditor.get('/queues');
  expect(refused.status).toBe(403);
  expect(refused.text).toContain('you are logged in as an auditor.');
  const user = await as('user', 'alice');
  const asUser = await user.get('/denials');
  expect(asUser.status).toBe(403);
  expect(asUser.text).toContain('you are logged in as a user.');
  expect(asUser.text).not.toMatch(/as a auditor|as an user/);
});

test('the Evidence page offers the month under way (UTC) by default', async () => {
  const auditor = await as('auditor', 'ann');
  const page = await auditor.get('/evidence');
  const month = new Date().toISOString().slice(0, 7);
  expect(page.text).toMatch(
    new RegExp(`<input type="month" name="month" value="${month}" max="${month}"`),
  );
});

test('a denial row links the task it names', async () => {
  const auditor = await as('auditor', 'ann');
  const page = await auditor.get('/denials');
  expect(page.text).toContain('mallory');
  expect(page.text).toContain(`<a href="/tasks/${taskId}">${taskId}</a>`);
  // The link leads to the task's page.
  expect((await auditor.get(`/tasks/${taskId}`)).status).toBe(200);
});

/** Posts a console form with the session's CSRF token from `page`. */
async function post(jar: CookieJar, page: string, path: string, form: Record<string, string>) {
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  expect(csrf).toBeDefined();
  return send(jar, `${console_.url}${path}`, { form: { csrf: csrf!, ...form } });
}

test("the Revocations page and its exports keep the operator's typed reason", async () => {
  const operator = await as('operator', 'olga');
  const page = (await operator.get('/principals?sub=mallory')).text;
  const revoked = await post(operator.jar, page, '/principals/revoke', {
    subject: 'mallory',
    reason: 'suspicious reads, ticket SEC-1',
  });
  expect(revoked.status).toBe(303);
  const restored = await post(operator.jar, page, '/principals/restore', {
    subject: 'mallory',
    reason: 'cleared by SEC-1 review',
  });
  expect(restored.status).toBe(303);

  const list = await operator.get('/revocations');
  expect(list.text).toContain('Reason given');
  expect(list.text).toContain('suspicious reads, ticket SEC-1');
  expect(list.text).toContain('cleared by SEC-1 review');
  const rows = JSON.parse((await operator.get('/revocations?format=json')).text) as Array<
    Record<string, unknown>
  >;
  expect(rows).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        type: 'principal.revoked',
        subject: 'mallory',
        reason: 'admin',
        note: 'suspicious reads, ticket SEC-1',
        actor_subject: 'olga',
      }),
      expect.objectContaining({
        type: 'principal.restored',
        subject: 'mallory',
        note: 'cleared by SEC-1 review',
      }),
    ]),
  );
  const csv = (await operator.get('/revocations?format=csv')).text.split('\r\n');
  expect(csv[0]).toBe('seq,occurred_at,type,subject,reason,note,actor_subject,actor_kind');
  expect(csv.some((line) => line.includes(',admin,"suspicious reads, ticket SEC-1",olga,'))).toBe(
    true,
  );
});
