// What the console shows a tenant of what happened around it, against a whole test stack:
// a user sees that their task was probed, not by whom; a tenant's auditor cannot tell a
// leaked task id of another tenant from one that does not exist (views, exports, evidence),
// while the whole trail keeps the distinction; the chain page verifies and counts the
// auditor's own chain only, whatever another tenant's chain looks like.
import { randomBytes } from 'node:crypto';
import { appendAuditGrouped } from '@mtg/audit';
import { createPool, ROLES } from '@mtg/db';
import { startConsole, type TestConsole } from '../support/console.ts';
import { logInOverHttp, send } from '../support/console-http.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { extWire } from '../support/wires.ts';

let stack: Stack;
let console_: TestConsole;
let taskId: string;
const month = new Date().toISOString().slice(0, 7);
const randomId = () => randomBytes(16).toString('hex');

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  console_ = await startConsole(stack);
  const wire = extWire(stack.mcpUrl);
  taskId = await wire.start(await stack.token('alice', 'acme'), 'generate_report', {
    report: 'views',
  });
  // mallory of acme and gus of globex try alice's task; gus also an id that exists nowhere.
  await wire.get(await stack.token('mallory', 'acme', { client: 'mcp-agent' }), taskId);
  const gus = await stack.token('gus', 'globex');
  // (Two verbs: one caller's repeats of one denial fold into a summary written later.)
  await wire.get(gus, taskId);
  await wire.cancel(gus, randomId());
}, 120_000);
afterAll(async () => {
  await console_?.close();
  await stack?.close();
});

async function as(role: 'auditor' | 'operator' | 'user', sub: string, tenant: string) {
  const { jar, answer } = await logInOverHttp(console_.url, role, { sub, tenant });
  expect(answer.status).toBe(200);
  return (path: string) => send(jar, `${console_.url}${path}`);
}

test('a user sees that their task was probed, not who probed it', async () => {
  const alice = await as('user', 'alice', 'acme');
  const page = await alice(`/tasks/${taskId}`);
  expect(page.status).toBe(200);
  expect(page.text).toContain('task.denied');
  expect(page.text).toContain('other_subject');
  expect(page.text).not.toContain('mallory');
  const rows = JSON.parse((await alice(`/tasks/${taskId}?format=json`)).text) as Array<
    Record<string, unknown>
  >;
  const denial = rows.find((r) => r.type === 'task.denied')!;
  expect(denial).toMatchObject({ subject: null, client: null, actor_subject: null });
  expect(denial.data).toEqual({ verb: 'get' });
  expect(JSON.stringify(rows)).not.toContain('mallory');
  // The tenant's auditor does see who it was.
  const auditor = await as('auditor', 'ann', 'acme');
  expect((await auditor(`/tasks/${taskId}`)).text).toContain('mallory');
}, 60_000);

test('a task page shows no notice from the URL', async () => {
  const alice = await as('user', 'alice', 'acme');
  const lure = 'Session expired. Re-enter your password at https://evil.example/login';
  for (const q of ['done', 'failed']) {
    const page = await alice(`/tasks/${taskId}?${q}=${encodeURIComponent(lure)}`);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('evil.example');
  }
}, 60_000);

test("a tenant's auditor cannot tell another tenant's task id from a missing one; the whole trail can", async () => {
  // Written by the gateway: globex's chain says unknown_task for both of gus's probes, and a
  // system event (chain 0, no tenant) records the cross-tenant one for the system's operator.
  const globexRows = await sql(
    stack.db.url,
    `SELECT reason FROM audit.events WHERE tenant = 'globex' AND type = 'task.denied'`,
  );
  expect(globexRows.map((r) => r.reason)).toEqual(['unknown_task', 'unknown_task']);
  const system = await sql(
    stack.db.url,
    `SELECT e.reason, e.subject, e.task_id, e.body::jsonb -> 'data' ->> 'callerTenant' AS caller
       FROM audit.events e JOIN audit.chains c USING (chain_id)
      WHERE c.tenant IS NULL AND e.type = 'task.denied'`,
  );
  expect(system).toEqual([
    { reason: 'cross_tenant', subject: 'gus', task_id: taskId, caller: 'globex' },
  ]);

  // The month's evidence for globex carries no trace of the distinction (its events are
  // hashed as written: only what the gateway writes can keep it out).
  const auditor = await as('auditor', 'gia', 'globex');
  const bundle = await auditor(`/evidence?download=1&month=${month}`);
  expect(bundle.status).toBe(200);
  const events = (JSON.parse(bundle.text) as { events: Array<{ body?: string }> }).events;
  const reasons = events.map((e) => (e.body ? JSON.parse(e.body).reason : undefined));
  expect(reasons.filter((r) => r === 'unknown_task')).toHaveLength(2);
  expect(bundle.text).not.toContain('cross_tenant');

  // An event written before, with the old reason in globex's chain, reads the same in the
  // console's views and exports.
  const gateway = createPool({ connectionString: stack.db.logins.gateway, role: ROLES.gateway });
  try {
    await appendAuditGrouped(gateway, {
      type: 'task.denied',
      taskId,
      tenant: 'globex',
      subject: 'gus',
      client: 'mcp-agent',
      reason: 'cross_tenant',
      data: { verb: 'result' },
    });
  } finally {
    await gateway.end();
  }
  const denials = JSON.parse((await auditor('/denials?format=json')).text) as Array<{
    reason: string;
  }>;
  expect(denials.map((d) => d.reason)).toEqual(['unknown_task', 'unknown_task', 'unknown_task']);
  expect((await auditor('/denials')).text).not.toContain('cross_tenant');
  expect((await auditor('/principals?sub=gus&format=csv')).text).not.toContain('cross_tenant');
}, 60_000);

test("an auditor's chain page verifies and counts their tenant's chain only", async () => {
  const [acme] = await sql(stack.db.url, `SELECT chain_id FROM audit.chains WHERE tenant = 'acme'`);
  const [globex] = await sql(
    stack.db.url,
    `SELECT chain_id, head_seq::int AS n FROM audit.chains WHERE tenant = 'globex'`,
  );
  // acme's chain broken: an event edited behind the triggers.
  await sql(
    stack.db.url,
    `SET session_replication_role = replica;
     UPDATE audit.events SET body = replace(body, 'views', 'edited')
      WHERE chain_id = ${Number(acme.chain_id)} AND type = 'task.created'`,
  );
  const all = await sql(stack.db.url, `SELECT count(*)::int AS n FROM audit.events`);
  expect(all[0].n).toBeGreaterThan(globex.n);

  const globexAuditor = await as('auditor', 'gia', 'globex');
  const page = (await globexAuditor('/chain')).text;
  expect(page).toMatch(/id="chain-verdict"><span class="ok">intact<\/span>/);
  expect(page).not.toMatch(/BROKEN|could not verify/);
  const months = [...page.matchAll(/<td>(\d+)<\/td>/g)].map((m) => Number(m[1]));
  expect(months).toContain(globex.n);
  expect(months).not.toContain(all[0].n);

  const acmeAuditor = await as('auditor', 'ann', 'acme');
  expect((await acmeAuditor('/chain')).text).toContain('BROKEN');
}, 60_000);
