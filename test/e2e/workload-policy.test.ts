import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { buildGateway, gatewayConfigSchema } from '@mtg/app-gateway';
import { parseConfig } from '@mtg/config';
import { createLogger } from '@mtg/log';
import { PolicyFileError } from '@mtg/policy';
import {
  createTestPki,
  forwardedCert,
  mcpRequest,
  type Issued,
  type TestPki,
} from '../support/certs.ts';
import { connectV1, connectV2 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

// mcp-agent may run reports; mcp-agent-2 on its own only looks around. The CI workload
// (a SPIFFE ID, here arriving through a proxy) may run reports with mcp-agent-2's tokens.
// The poller workload may use the job tools with mcp-agent's tokens, but not reports.
const POLICY = `
workloads:
  - id: mcp-agent
    tools: [whoami, generate_report, get_job_status, get_job_result, cancel_job, list_jobs]
  - id: mcp-agent-2
    tools: [whoami, list_jobs]
  - id: spiffe://example.org/agent/ci
    clients: [mcp-agent-2]
    tools: [whoami, generate_report, list_jobs]
  - id: spiffe://example.org/agent/poller
    clients: [mcp-agent]
    tools: [get_job_status, get_job_result, cancel_job, list_jobs]
tools:
  generate_report: { scopes: [reports:run, records:write] }
default: deny
`;

const PROXY = '127.0.0.2';

let pki: TestPki;
let stack: Stack;
let ciCert: Issued;
let pollerCert: Issued;
beforeAll(async () => {
  pki = await createTestPki();
  ciCert = await pki.client('ci', { uris: ['spiffe://example.org/agent/ci'] });
  pollerCert = await pki.client('poller', { uris: ['spiffe://example.org/agent/poller'] });
  const policyFile = path.join(pki.dir, 'policy.yaml');
  await writeFile(policyFile, POLICY);
  stack = await startStack({
    workers: 0,
    env: {
      POLICY_FILE: policyFile,
      TRUSTED_PROXIES: PROXY,
      // No TLS listener here (the proxy terminates TLS); the CA still vets forwarded certificates.
      GATEWAY_TLS_CLIENT_CA: pki.ca.certFile,
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await pki?.close();
});

const names = (tools: Array<{ name: string }>) => tools.map((t) => t.name).sort();

async function policyDenials(client: string, tool: string) {
  return sql(
    stack.db.url,
    `SELECT type, reason, tool, client, body::jsonb -> 'data' AS data FROM audit.events
      WHERE reason = 'policy_denied' AND client = $1 AND tool = $2 ORDER BY seq`,
    [client, tool],
  );
}

test('tools/list shows each agent only what the policy lets its OAuth client call, to v1 and v2 clients alike', async () => {
  const agent = await stack.token('alice', 'acme');
  const agent2 = await stack.token('alice', 'acme', { client: 'mcp-agent-2' });
  const expectedAgent = [
    'cancel_job',
    'generate_report',
    'get_job_result',
    'get_job_status',
    'list_jobs',
    'whoami',
  ];
  for (const connect of [connectV1, connectV2]) {
    const a = await connect(stack.mcpUrl, agent);
    expect(names((await a.listTools()).tools)).toEqual(expectedAgent);
    await a.close();
    const b = await connect(stack.mcpUrl, agent2);
    expect(names((await b.listTools()).tools)).toEqual(['list_jobs', 'whoami']);
    await b.close();
  }
});

test('a denied tool answers like an unknown tool on every wire, is audited as policy_denied, and creates no task', async () => {
  const token = await stack.token('bob', 'acme', { client: 'mcp-agent-2' });
  const args = { report: 'quarterly', rows: 10 };

  const v1 = await connectV1(stack.mcpUrl, token);
  const plainV1 = await v1.callTool({ name: 'generate_report', arguments: args }).catch((e) => e);
  const unknownV1 = await v1.callTool({ name: 'no_such_tool', arguments: {} }).catch((e) => e);
  expect(plainV1).toMatchObject({
    code: -32602,
    message: expect.stringContaining('Unknown tool: generate_report'),
  });
  expect(unknownV1).toMatchObject({
    code: -32602,
    message: expect.stringContaining('Unknown tool: no_such_tool'),
  });
  const coreTask = await v1
    .request(
      { method: 'tools/call', params: { name: 'generate_report', arguments: args, task: {} } },
      CreateTaskResultSchema,
    )
    .catch((e) => e);
  expect(coreTask).toMatchObject({
    code: -32602,
    message: expect.stringContaining('Unknown tool: generate_report'),
  });
  await v1.close();

  const v2 = await connectV2(stack.mcpUrl, token);
  const plainV2 = await v2.callTool({ name: 'generate_report', arguments: args }).catch((e) => e);
  expect(plainV2).toMatchObject({
    code: -32602,
    message: expect.stringContaining('Unknown tool: generate_report'),
  });
  await v2.close();

  const ext = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'generate_report', arguments: args },
    { tasksExtension: true },
  );
  const extUnknown = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'no_such_tool', arguments: {} },
    { tasksExtension: true },
  );
  expect(ext.body.error).toEqual({
    ...extUnknown.body.error,
    message: 'Unknown tool: generate_report',
  });
  expect(ext.body.error.code).toBe(-32602);

  expect(await sql(stack.db.url, `SELECT id FROM app.tasks WHERE client = 'mcp-agent-2'`)).toEqual(
    [],
  );
  const denials = await policyDenials('mcp-agent-2', 'generate_report');
  expect(denials).toHaveLength(4);
  for (const d of denials) {
    expect(d).toMatchObject({
      type: 'task.denied',
      data: {
        verb: 'start',
        workload: { kind: 'oauth-client', id: 'mcp-agent-2' },
        rule: 'tool_not_allowed',
        entry: 'mcp-agent-2',
      },
    });
  }
});

test('the agent the policy allows starts the same tool', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('carol', 'acme'));
  const result = await client.callTool({
    name: 'generate_report',
    arguments: { report: 'allowed', rows: 10 },
  });
  await client.close();
  expect(result.isError).toBeFalsy();
  const jobId = (result.structuredContent as { jobId: string }).jobId;
  expect(
    await sql(stack.db.url, `SELECT client, tool FROM app.tasks WHERE id = $1`, [jobId]),
  ).toEqual([{ client: 'mcp-agent', tool: 'generate_report' }]);
});

test('a job tool outside the policy is unknown too, audited as auth.denied', async () => {
  const client = await connectV1(
    stack.mcpUrl,
    await stack.token('dave', 'acme', { client: 'mcp-agent-2' }),
  );
  const denied = await client
    .callTool({ name: 'get_job_status', arguments: { jobId: 'x' } })
    .catch((e) => e);
  await client.close();
  expect(denied).toMatchObject({
    code: -32602,
    message: expect.stringContaining('Unknown tool: get_job_status'),
  });
  const rows = await policyDenials('mcp-agent-2', 'get_job_status');
  expect(rows).toEqual([
    expect.objectContaining({
      type: 'auth.denied',
      data: expect.objectContaining({ rule: 'tool_not_allowed' }),
    }),
  ]);
});

test('scopes the policy adds to a tool must be held as well: without them the tool is hidden and refused', async () => {
  const token = await stack.token('erin', 'acme', { scope: 'reports:run' });
  const client = await connectV1(stack.mcpUrl, token);
  expect(names((await client.listTools()).tools)).not.toContain('generate_report');
  const denied = await client
    .callTool({ name: 'generate_report', arguments: { report: 'r' } })
    .catch((e) => e);
  await client.close();
  expect(denied).toMatchObject({ code: -32602 });
  const rows = await sql(
    stack.db.url,
    `SELECT body::jsonb -> 'data' AS data FROM audit.events WHERE reason = 'policy_denied' AND subject = 'erin'`,
  );
  expect(rows).toEqual([
    { data: expect.objectContaining({ rule: 'missing_scopes', missingScopes: ['records:write'] }) },
  ]);
});

describe('a client certificate forwarded by a proxy', () => {
  let token: string;
  beforeAll(async () => {
    token = await stack.token('frank', 'acme', { client: 'mcp-agent-2' });
  });
  const headers = (cert: Issued) => ({ 'x-forwarded-client-cert': forwardedCert(cert) });

  test('from a trusted proxy, its SPIFFE ID selects the policy entry and unlocks what the entry allows', async () => {
    const listed = await mcpRequest(
      stack.mcpUrl,
      token,
      'tools/list',
      {},
      { localAddress: PROXY, headers: headers(ciCert) },
    );
    expect(names(listed.body.result.tools)).toEqual(['generate_report', 'list_jobs', 'whoami']);
    const started = await mcpRequest(
      stack.mcpUrl,
      token,
      'tools/call',
      { name: 'generate_report', arguments: { report: 'ci' } },
      { localAddress: PROXY, headers: headers(ciCert) },
    );
    expect(started.body.result.structuredContent).toMatchObject({
      tool: 'generate_report',
      status: 'working',
    });
  });

  test('from any other peer the header is ignored, so the call that needs it is denied', async () => {
    const listed = await mcpRequest(
      stack.mcpUrl,
      token,
      'tools/list',
      {},
      { localAddress: '127.0.0.1', headers: headers(ciCert) },
    );
    expect(names(listed.body.result.tools)).toEqual(['list_jobs', 'whoami']);
    const denied = await mcpRequest(
      stack.mcpUrl,
      token,
      'tools/call',
      { name: 'generate_report', arguments: { report: 'spoofed' } },
      { localAddress: '127.0.0.1', headers: headers(ciCert) },
    );
    expect(denied.body.error).toMatchObject({
      code: -32602,
      message: 'Unknown tool: generate_report',
    });
    const rows = await sql(
      stack.db.url,
      `SELECT body::jsonb -> 'data' AS data FROM audit.events WHERE reason = 'policy_denied' AND subject = 'frank'`,
    );
    expect(rows).toEqual([
      { data: expect.objectContaining({ workload: { kind: 'oauth-client', id: 'mcp-agent-2' } }) },
    ]);
  });

  test('the policy gates the task verbs too: only a workload that may use the tool reads or cancels its tasks', async () => {
    const gina = await stack.token('gina', 'acme', { client: 'mcp-agent-2' });
    type From = { localAddress: string; headers: Record<string, string> };
    const fromCi: From = { localAddress: PROXY, headers: headers(ciCert) };
    const fromAgent2: From = { localAddress: '127.0.0.1', headers: {} };
    const started = await mcpRequest(
      stack.mcpUrl,
      gina,
      'tools/call',
      { name: 'generate_report', arguments: { report: 'gated' } },
      { ...fromCi, tasksExtension: true },
    );
    const taskId = started.body.result.taskId as string;
    expect(taskId).toMatch(/^[0-9a-f]{32}$/);
    const verb = (method: string, id: string, from: From) =>
      mcpRequest(
        stack.mcpUrl,
        gina,
        method,
        { taskId: id },
        { ...from, tasksExtension: true, headers: { ...from.headers, 'mcp-name': id } },
      );

    expect((await verb('tasks/get', taskId, fromCi)).body.result).toMatchObject({
      taskId,
      status: 'working',
    });
    // Same user, same OAuth client, but a workload the policy keeps away from the tool: the
    // task does not exist for it, exactly as a task that does not exist.
    const missing = await verb('tasks/get', 'f'.repeat(32), fromAgent2);
    const denied = await verb('tasks/get', taskId, fromAgent2);
    expect(denied).toEqual(missing);
    expect(denied.body.error).toMatchObject({ code: -32602, message: 'Task not found' });
    expect((await verb('tasks/cancel', taskId, fromAgent2)).body).toEqual({
      ...missing.body,
      id: expect.anything(),
    });
    expect(
      await sql(stack.db.url, 'SELECT status, cancel_requested_at FROM app.tasks WHERE id = $1', [
        taskId,
      ]),
    ).toEqual([{ status: 'working', cancel_requested_at: null }]);
    const rows = await sql(
      stack.db.url,
      `SELECT type, tool, body::jsonb -> 'data' ->> 'verb' AS verb FROM audit.events
        WHERE reason = 'policy_denied' AND subject = 'gina' ORDER BY seq`,
    );
    expect(rows).toEqual([
      { type: 'task.denied', tool: 'generate_report', verb: 'get' },
      { type: 'task.denied', tool: 'generate_report', verb: 'cancel' },
    ]);
  });

  test('a SPIFFE workload that does not bind the token’s OAuth client is refused', async () => {
    const other = await stack.token('frank', 'acme');
    const listed = await mcpRequest(
      stack.mcpUrl,
      other,
      'tools/list',
      {},
      { localAddress: PROXY, headers: headers(ciCert) },
    );
    expect(listed.body.result.tools).toEqual([]);
  });

  test('even from a trusted proxy, a certificate from another CA or an unreadable one is refused and audited', async () => {
    const rogue = await pki.client('rogue-ci', {
      uris: ['spiffe://example.org/agent/ci'],
      issuer: await pki.rogueCa(),
    });
    const untrusted = await mcpRequest(
      stack.mcpUrl,
      token,
      'tools/list',
      {},
      { localAddress: PROXY, headers: headers(rogue) },
    );
    expect(untrusted.status).toBe(403);
    expect(untrusted.body).toMatchObject({ error: 'invalid_client_certificate' });
    const garbage = await mcpRequest(
      stack.mcpUrl,
      token,
      'tools/list',
      {},
      { localAddress: PROXY, headers: { 'x-forwarded-client-cert': 'not-a-certificate' } },
    );
    expect(garbage.status).toBe(403);
    const rows = await sql(
      stack.db.url,
      `SELECT type, reason FROM audit.events WHERE subject = 'frank' AND type = 'auth.denied' ORDER BY seq`,
    );
    expect(rows).toEqual([
      { type: 'auth.denied', reason: 'client_cert_untrusted' },
      { type: 'auth.denied', reason: 'client_cert_invalid' },
    ]);
  });
});

describe('the job tools under a policy', () => {
  // Last in this file: a worker runs the jobs from here on (the tests above need theirs to
  // stay working).
  beforeAll(async () => {
    await stack.addWorker();
  });
  type Job = { isError?: boolean; content: unknown; structuredContent?: any };
  const TERMINAL = ['completed', 'failed', 'cancelled'];

  test('an agent the policy allows follows its job through the job tools to its result, and cancels one', async () => {
    const token = await stack.token('hank', 'acme');
    const client = await connectV1(stack.mcpUrl, token);
    const call = (name: string, args: Record<string, unknown>) =>
      client.callTool({ name, arguments: args }) as Promise<Job>;
    const started = await call('generate_report', { report: 'polled', rows: 10 });
    const jobId = started.structuredContent.jobId as string;
    const status = await pollUntil(
      () => call('get_job_status', { jobId }),
      (r) => r.isError === true || TERMINAL.includes(r.structuredContent?.status),
      30_000,
      250,
    );
    expect(status).toMatchObject({ structuredContent: { jobId, status: 'completed' } });
    expect(status.isError).toBeFalsy();
    const result = await call('get_job_result', { jobId });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ report: 'polled', rows: 10 });

    const other = await call('generate_report', { report: 'to-cancel', rows: 10 });
    const cancelled = await call('cancel_job', { jobId: other.structuredContent.jobId });
    expect(cancelled.isError).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({ status: 'cancelled' });
    await client.close();
    expect(
      await sql(
        stack.db.url,
        `SELECT type FROM audit.events WHERE reason = 'policy_denied' AND subject = 'hank'`,
      ),
    ).toEqual([]);
  });

  test('a workload allowed the job tools but not the job’s tool gets “Task not found” for it, audited as policy_denied', async () => {
    const token = await stack.token('ivan', 'acme');
    const owner = await connectV1(stack.mcpUrl, token);
    const started = (await owner.callTool({
      name: 'generate_report',
      arguments: { report: 'kept-away', rows: 10 },
    })) as Job;
    await owner.close();
    const jobId = started.structuredContent.jobId as string;
    const fromPoller = {
      localAddress: PROXY,
      headers: { 'x-forwarded-client-cert': forwardedCert(pollerCert) },
    };
    const jobTool = async (name: string, id: string, as = token) =>
      (
        await mcpRequest(
          stack.mcpUrl,
          as,
          'tools/call',
          { name, arguments: { jobId: id } },
          fromPoller,
        )
      ).body.result;
    for (const name of ['get_job_status', 'get_job_result', 'cancel_job']) {
      const denied = await jobTool(name, jobId);
      expect(denied).toEqual(await jobTool(name, 'f'.repeat(32)));
      expect(denied).toMatchObject({
        isError: true,
        content: [{ type: 'text', text: 'Task not found' }],
      });
    }
    const rows = await sql(
      stack.db.url,
      `SELECT type, tool, body::jsonb -> 'data' ->> 'verb' AS verb FROM audit.events
        WHERE reason = 'policy_denied' AND subject = 'ivan' ORDER BY seq`,
    );
    expect(rows).toEqual(
      ['get', 'result', 'cancel'].map((verb) => ({
        type: 'task.denied',
        tool: 'generate_report',
        verb,
      })),
    );
    // Nor does a token without the tool's scope get the owner's step-up challenge here: to
    // this workload the task does not exist.
    const narrowed = await stack.token('ivan', 'acme', { scope: 'env:provision' });
    const hidden = await jobTool('get_job_status', jobId, narrowed);
    expect(hidden).toEqual(await jobTool('get_job_status', 'f'.repeat(32), narrowed));
    expect(hidden).toMatchObject({ isError: true, content: [{ text: 'Task not found' }] });
    const [task] = await sql(
      stack.db.url,
      'SELECT cancel_requested_at FROM app.tasks WHERE id = $1',
      [jobId],
    );
    expect(task).toEqual({ cancel_requested_at: null });
  });
});

test('a gateway given a policy file naming an unknown tool does not start, and says which file and what is wrong', async () => {
  const file = path.join(pki.dir, 'typo.yaml');
  await writeFile(
    file,
    'workloads:\n  - id: mcp-agent\n    tools: [whoami, generate_reprot]\ndefault: deny\n',
  );
  const env = { ...stack.env, POLICY_FILE: file };
  const failed = await buildGateway(
    parseConfig(gatewayConfigSchema, env),
    createLogger('test', { silent: true }),
  ).catch((e) => e);
  expect(failed).toBeInstanceOf(PolicyFileError);
  expect(failed.message).toBe(
    `policy file ${file}: workloads[0].tools[1]: unknown tool "generate_reprot"`,
  );
});
