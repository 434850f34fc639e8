// A poll's rate-limit count rides in its revocation check's statement (rejectRevoked with
// `polls`, RateLimits.countPollWithin) and its verb spends that count. Each kind of poll, on
// each path (the fast paths and the SDK's), must count exactly once, and a revoked caller's
// poll is refused as revoked — also when the poll limit refuses it from memory, where no
// count is made and the revocation is looked up alone.
import { createHash } from 'node:crypto';
import { CallToolResultSchema, GetTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { postMcp } from '../support/raw-post.ts';
import { setRevoked } from '../support/principals.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { submittedStatements } from '../support/submitted-statements.ts';
import { jobToolsWire } from '../support/wires.ts';

const REVOKED = 'access for this principal has been revoked';
const LIMIT = 3;
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 0,
    env: { RATE_LIMIT_POLLS_PER_SECOND: String(LIMIT) },
  });
});
afterAll(async () => {
  await stack?.close();
});

/** The caller's row in app.rate_limits for the poll limit (keys are hashed, see rate-limit.ts). */
async function pollsCounted(subject: string): Promise<number | undefined> {
  const key = `polls:${createHash('sha256')
    .update(`acme\u0000${subject}\u0000mcp-agent`)
    .digest('base64url')}`;
  const rows = await sql(stack.db.url, 'SELECT points FROM app.rate_limits WHERE key = $1', [key]);
  return rows[0]?.points;
}

const post = (token: string, headers: Record<string, string>, body: unknown) =>
  postMcp(stack.mcpUrl, token, headers, body);
/** A 2025-11-25 JSON-RPC request, as the v1 SDK sends it to a stateless server. */
const rpc2025 = (token: string, method: string, params: Record<string, unknown>) =>
  post(token, { 'mcp-protocol-version': '2025-11-25' }, { jsonrpc: '2.0', id: 1, method, params });
const jobTool = (token: string, name: string, jobId: string) =>
  rpc2025(token, 'tools/call', { name, arguments: { jobId } });

/** Each kind of poll, as a client sends it; `fast` ones are answered without the SDK. */
const POLLS: Record<string, (token: string, id: string) => Promise<{ status: number; body: any }>> =
  {
    '2026 tasks/get (fast path)': (t, id) =>
      rpc2026(stack.mcpUrl, t, 'tasks/get', { taskId: id }, { tasksExtension: true }),
    '2025 tasks/get (fast path)': (t, id) => rpc2025(t, 'tasks/get', { taskId: id }),
    'get_job_status (fast path)': (t, id) => jobTool(t, 'get_job_status', id),
    '2025 tasks/get with a progress token (through the SDK)': (t, id) =>
      rpc2025(t, 'tasks/get', { taskId: id, _meta: { progressToken: 7 } }),
    'get_job_result (through the SDK)': (t, id) => jobTool(t, 'get_job_result', id),
  };

const startFor = async (subject: string) => {
  const token = await stack.token(subject, 'acme');
  const id = await jobToolsWire(stack.mcpUrl).start(token, 'generate_report', { report: subject });
  return { token, id };
};

test.each(Object.keys(POLLS))('%s spends exactly one count of the poll limit', async (kind) => {
  const subject = `pc-${kind.replace(/\W+/g, '-')}`;
  const { token, id } = await startFor(subject);
  expect(await pollsCounted(subject)).toBeUndefined(); // a start is not a poll
  const r = await POLLS[kind]!(token, id);
  expect(r.status).toBe(200);
  expect(JSON.stringify(r.body)).toContain(id);
  expect(await pollsCounted(subject)).toBe(1);
});

test('through the v1 SDK client, a tasks/get and a get_job_status are one count each', async () => {
  const { token, id } = await startFor('pc-sdk');
  const client = await connectV1(stack.mcpUrl, token);
  try {
    await client.request({ method: 'tasks/get', params: { taskId: id } }, GetTaskResultSchema);
    expect(await pollsCounted('pc-sdk')).toBe(1);
    await client.request(
      { method: 'tools/call', params: { name: 'get_job_status', arguments: { jobId: id } } },
      CallToolResultSchema,
    );
    // Two polls in one window, or the second one opened the next window.
    expect([1, 2]).toContain(await pollsCounted('pc-sdk'));
  } finally {
    await client.close();
  }
});

/** The statements sent while `during` runs that read or write a task or a principal. */
const taskStatements = async (during: () => Promise<unknown>) =>
  (await submittedStatements(during)).filter((text) =>
    /app\.(tasks|principals|status_read_marks)\b/.test(text),
  );

test.each(Object.keys(POLLS))(
  '%s of a status already read is one round trip: the task read in the revocation check’s statement',
  async (kind) => {
    const subject = `pc-one-${kind.replace(/\W+/g, '-')}`;
    const { token, id } = await startFor(subject);
    // The first read of this status: audited, marked (two polls stay within the limit of 3).
    await POLLS[kind]!(token, id);
    let r: { status: number; body: any } | undefined;
    const statements = await taskStatements(async () => {
      r = await POLLS[kind]!(token, id);
    });
    expect(r!.status).toBe(200);
    expect(JSON.stringify(r!.body)).toContain(id);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/app\.principals[\s\S]*app\.tasks/);
  },
);

const revoke = (subject: string, revoked: boolean) => setRevoked(stack.db.url, subject, revoked);

test('a revoked caller’s polls, every kind, are refused as revoked and audited; a token from before a restore stays refused', async () => {
  const { token, id } = await startFor('pc-revoked');
  await revoke('pc-revoked', true);
  for (const [kind, poll] of Object.entries(POLLS)) {
    const r = await poll(token, id);
    expect({ kind, status: r.status, body: r.body }).toEqual({
      kind,
      status: 401,
      body: { error: 'invalid_token', error_description: REVOKED },
    });
  }
  const denied = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events
      WHERE type = 'auth.denied' AND reason = 'principal_revoked' AND subject = 'pc-revoked'`,
  );
  expect(denied[0].n).toBe(Object.keys(POLLS).length);

  // Restored: the token issued before the revocation's second is still refused, on a poll too.
  await revoke('pc-revoked', false);
  const r = await POLLS['2025 tasks/get (fast path)']!(token, id);
  expect(r.status).toBe(401);
  expect(r.body.error_description).toContain('issued before access for this principal was revoked');
});

test('a caller the poll limit refuses from memory is still refused as revoked once revoked', async () => {
  const { token, id } = await startFor('pc-flood');
  const poll = POLLS['get_job_status (fast path)']!;
  // Enough that some are refused however many windows a slow machine spreads the burst over.
  const burst = await Promise.all(Array.from({ length: LIMIT * 8 }, () => poll(token, id)));
  expect(burst.some((r) => r.body?.result?.isError === true)).toBe(true); // rate limited
  // Within the window the refused caller is answered from memory, with no count to ride on.
  await revoke('pc-flood', true);
  const after = await poll(token, id);
  expect(after.status).toBe(401);
  expect(after.body).toEqual({ error: 'invalid_token', error_description: REVOKED });
});
