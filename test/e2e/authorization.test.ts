import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  GetTaskResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { frame2026 } from '../../scripts/lib/mcp-2026-frame.ts';
import { sql } from '../support/sql.ts';
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

/**
 * The HTTP status (and any WWW-Authenticate challenge) one verb gets on one wire: raw for
 * the 2026 extension, through the v1 SDK client for core tasks and the job tools.
 */
async function challenge(
  kind: string,
  token: string,
  verb: (typeof verbs)[number],
  taskId: string,
): Promise<{ status: number; wwwAuthenticate?: string }> {
  if (kind === 'ext') {
    const method = verb === 'cancel' ? 'tasks/cancel' : 'tasks/get';
    const frame = frame2026(token, method, { taskId }, { tasksExtension: true });
    const r = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: frame.headers,
      body: frame.body,
    });
    await r.text();
    const www = r.headers.get('www-authenticate');
    return { status: r.status, ...(www ? { wwwAuthenticate: www } : {}) };
  }
  let refused: { status: number; wwwAuthenticate?: string } | undefined;
  const client = new V1Client({ name: 'step-up', version: '1' });
  await client.connect(
    new V1Transport(new URL(stack.mcpUrl), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
      fetch: async (input, init) => {
        const r = await fetch(input, init);
        const www = r.headers.get('www-authenticate');
        // Only the verb's POST (the SDK also probes GET for a stream, which answers 405).
        if (!r.ok && init?.method === 'POST')
          refused = { status: r.status, ...(www ? { wwwAuthenticate: www } : {}) };
        return r;
      },
    }),
  );
  try {
    const answer =
      kind === 'jobs'
        ? client.callTool({ name: JOB_TOOLS[verb], arguments: { jobId: taskId } })
        : client.request(
            { method: `tasks/${verb}`, params: { taskId } },
            verb === 'get'
              ? GetTaskResultSchema
              : verb === 'result'
                ? CallToolResultSchema
                : CancelTaskResultSchema,
          );
    const error = await answer.then(
      () => undefined,
      (e: { code?: unknown }) => e,
    );
    // The SDK client surfaces the HTTP refusal as its error code.
    if (refused) expect(error).toMatchObject({ code: refused.status });
    return refused ?? { status: 200 };
  } finally {
    await client.close();
  }
}
const JOB_TOOLS = { get: 'get_job_status', result: 'get_job_result', cancel: 'cancel_job' };

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

  test('an owner whose token lost the tool scope is asked to step up: HTTP 403 insufficient_scope naming the scope, nothing done', async () => {
    const narrowed = await stack.token('alice', 'acme', { scope: 'reports:run' });
    for (const verb of verbs) {
      expect(await challenge(kind, narrowed, verb, taskId)).toEqual({
        status: 403,
        wwwAuthenticate: expect.stringMatching(
          /^Bearer error="insufficient_scope", error_description="Your token lacks scope records:write, needed for tasks of bulk_update_records", scope="records:write", resource_metadata="http:\/\/.+"$/,
        ),
      });
    }
    expect(
      await sql(
        stack.db.url,
        `SELECT body::jsonb -> 'data' ->> 'verb' AS verb FROM audit.events
          WHERE task_id = $1 AND type = 'task.denied' AND reason = 'scope_missing' ORDER BY seq`,
        [taskId],
      ),
      // (The ext wire reads the result with a second tasks/get: a repeat of the same denial on
      // the same task, which folds into the first; docs/tasks.md.)
    ).toEqual((kind === 'ext' ? ['get', 'cancel'] : verbs).map((verb) => ({ verb })));
    expect(
      await sql(stack.db.url, 'SELECT cancel_requested_at FROM app.tasks WHERE id = $1', [taskId]),
    ).toEqual([{ cancel_requested_at: null }]);
    // Stepped up to the scope the challenge named, the same token request reads the task.
    const stepped = await stack.token('alice', 'acme', { scope: 'records:write' });
    expect((await wire.get(stepped, taskId)).ok).toBe(true);
  });

  test('with a narrowed token, a stranger still gets the not-found answer, never the step-up', async () => {
    const stranger = await stack.token('bob', 'acme', { scope: 'reports:run' });
    for (const verb of verbs) {
      expect(await challenge(kind, stranger, verb, taskId)).toEqual({ status: 200 });
      expect(await wire[verb](stranger, taskId)).toEqual(await wire[verb](stranger, randomId()));
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

test('an administrator’s cancel of another user’s task is no denial: exactly the admin cancel; a stranger’s cancel is one', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const start = async (who: string) =>
    wire.start(await stack.token(who, 'acme'), 'bulk_update_records', {
      collection: `adm-${who}`,
      count: 3000,
      patch: { b: 1 },
    });
  const eventsOf = (taskId: string) =>
    sql<{ type: string; reason: string | null; subject: string }>(
      stack.db.url,
      `SELECT type, reason, subject FROM audit.events WHERE task_id = $1 ORDER BY seq`,
      [taskId],
    );

  const davesTask = await start('dave');
  const admin = await stack.token('operator-7', 'acme', { scope: 'tasks:admin records:write' });
  expect(await wire.cancel(admin, davesTask)).toMatchObject({
    ok: true,
    value: { status: 'cancelled' },
  });
  const adminEvents = await eventsOf(davesTask);
  expect(adminEvents.filter((e) => e.type === 'task.denied')).toEqual([]);
  expect(adminEvents.filter((e) => e.type === 'task.admin_cancelled')).toHaveLength(1);
  expect(adminEvents.filter((e) => e.type === 'task.cancelled')).toEqual([]);

  // As the console does it: tasks/cancel over MCP with an operator's token of tasks:admin only.
  const gretasTask = await start('greta');
  const operator = await stack.token('operator-8', 'acme', { scope: 'tasks:admin' });
  expect(await coreWire(stack.mcpUrl).cancel(operator, gretasTask)).toMatchObject({ ok: true });
  const operatorEvents = await eventsOf(gretasTask);
  expect(operatorEvents.filter((e) => e.type === 'task.denied')).toEqual([]);
  expect(operatorEvents.filter((e) => e.type === 'task.admin_cancelled')).toHaveLength(1);

  // Without the administrator scope it is a refusal: audited, and answered as a missing task.
  const ericsTask = await start('eric');
  const stranger = await stack.token('frank', 'acme');
  const refused = await wire.cancel(stranger, ericsTask);
  expect(refused.ok).toBe(false);
  expect(refused).toEqual(await wire.cancel(stranger, randomId()));
  const strangerEvents = await eventsOf(ericsTask);
  expect(
    strangerEvents.filter((e) => e.type === 'task.denied').map((e) => [e.subject, e.reason]),
  ).toEqual([['frank', 'other_subject']]);
  expect(strangerEvents.map((e) => e.type)).not.toContain('task.admin_cancelled');
});
