import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire, jobToolsWire, type Answer, type Wire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  // Slow steps: the tasks stay running while others poke at them.
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '3000' } });
});
afterAll(async () => {
  await stack?.close();
});

const randomId = () => randomBytes(16).toString('hex');
const verbs = ['get', 'result', 'cancel'] as const;

describe.each([['core'], ['ext'], ['jobs']])('%s wire: only the owner reaches a task', (kind) => {
  let wire: Wire;
  let taskId: string;
  let owner: string;
  beforeAll(async () => {
    wire =
      kind === 'core'
        ? coreWire(stack.mcpUrl)
        : kind === 'ext'
          ? extWire(stack.mcpUrl)
          : jobToolsWire(stack.mcpUrl);
    owner = await stack.token('alice', 'acme');
    taskId = await wire.start(owner, 'bulk_update_records', {
      collection: `c-${kind}`,
      count: 3000,
      patch: { flag: kind },
    });
  });

  const strangers: Array<[string, () => Promise<string>]> = [
    ['another user in the same tenant', () => stack.token('bob', 'acme')],
    ['the same user name in another tenant', () => stack.token('alice', 'globex')],
    [
      'the same user through another client',
      () => stack.token('alice', 'acme', { client: 'mcp-agent-2' }),
    ],
  ];

  test.each(strangers)(
    '%s is denied every verb exactly as for a random task id',
    async (_who, tokenFor) => {
      const token = await tokenFor();
      for (const verb of verbs) {
        const foreign: Answer = await wire[verb](token, taskId);
        const missing: Answer = await wire[verb](token, randomId());
        expect(foreign.ok).toBe(false);
        expect(foreign).toEqual(missing);
      }
      const listed = await wire.list(token);
      if (listed) expect(listed).not.toContain(taskId);
    },
  );

  test('a token that lost the tool scope is denied', async () => {
    const token = await stack.token('alice', 'acme', { scope: 'reports:run' });
    for (const verb of verbs) {
      const answer = await wire[verb](token, taskId);
      expect(answer.ok).toBe(false);
    }
  });

  test('a token narrowed to another tool’s scope does not list the task, and lists that tool’s tasks', async () => {
    const narrowed = await stack.token('alice', 'acme', { scope: 'reports:run' });
    const report = await wire.start(narrowed, 'generate_report', { report: `r-${kind}` });
    const listed = await wire.list(narrowed);
    if (listed) {
      expect(listed).toContain(report);
      expect(listed).not.toContain(taskId);
      expect(await wire.list(owner)).toEqual(expect.arrayContaining([report, taskId]));
    }
  });

  test('iterating task ids finds nothing, indistinguishable from a missing task', async () => {
    const token = await stack.token('mallory', 'acme');
    const answers = new Set<string>();
    for (let i = 0; i < 10; i++) answers.add(JSON.stringify(await wire.get(token, randomId())));
    answers.add(JSON.stringify(await wire.get(token, taskId)));
    expect(answers.size).toBe(1);
  });

  test('the owner still reads and cancels it', async () => {
    expect((await wire.get(owner, taskId)).ok).toBe(true);
    expect((await wire.cancel(owner, taskId)).ok).toBe(true);
  });
});

test('an administrator cancels another user’s task in their own tenant, not in another tenant', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const acmeTask = await wire.start(await stack.token('carol', 'acme'), 'bulk_update_records', {
    collection: 'adm',
    count: 3000,
    patch: { a: 1 },
  });
  const globexAdmin = await stack.token('root', 'globex', { scope: 'tasks:admin records:write' });
  const denied = await wire.cancel(globexAdmin, acmeTask);
  expect(denied).toEqual(await wire.cancel(globexAdmin, randomId()));
  const acmeAdmin = await stack.token('root', 'acme', { scope: 'tasks:admin records:write' });
  const cancelled = await wire.cancel(acmeAdmin, acmeTask);
  expect(cancelled).toMatchObject({ ok: true, value: { status: 'cancelled' } });

  const db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
  const events = await db.query(
    `SELECT type, reason FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [acmeTask],
  );
  await db.end();
  expect(events.rows.map((r) => r.type)).toEqual(
    expect.arrayContaining(['task.created', 'task.cancel_requested', 'task.admin_cancelled']),
  );
  expect(events.rows.filter((r) => r.type === 'task.denied').map((r) => r.reason)).toContain(
    'cross_tenant',
  );
});
