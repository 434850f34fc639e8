// A start's rate-limit counts ride in its revocation check's statement (rejectRevoked with
// `counts`, RateLimits.countStartWithin) and its verb spends them. Each kind of start must
// count exactly once on each limit, a revoked caller's start is refused as revoked, and a
// start answered before its verb (invalid arguments) after being refused by a limit leaves
// that window's audited refusal to the next start it refuses.
import { createHash } from 'node:crypto';
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
    env: { RATE_LIMIT_STARTS_PER_MINUTE: String(LIMIT) },
  });
});
afterAll(async () => {
  await stack?.close();
});

const hashed = (key: string) => createHash('sha256').update(key).digest('base64url');
/** The subject's count of each start limit (keys are hashed, see rate-limit.ts). */
async function startsCounted(subject: string) {
  const keys = {
    starts: `starts:${hashed(`acme\u0000${subject}`)}`,
    client_starts: `client_starts:${hashed('acme\u0000mcp-agent')}`,
    tenant_starts: `tenant_starts:${hashed('acme')}`,
  };
  const rows = await sql(
    stack.db.url,
    'SELECT key, points FROM app.rate_limits WHERE key = ANY($1)',
    [Object.values(keys)],
  );
  const of = (key: string) => rows.find((r: { key: string }) => r.key === key)?.points;
  return {
    starts: of(keys.starts),
    client_starts: of(keys.client_starts),
    tenant_starts: of(keys.tenant_starts),
  };
}

const rpc2025 = (token: string, params: Record<string, unknown>) =>
  postMcp(
    stack.mcpUrl,
    token,
    { 'mcp-protocol-version': '2025-11-25' },
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params },
  );

/** Each kind of start, as a client sends it; `fast` ones count beside the revocation check. */
const STARTS: Record<
  string,
  (token: string, args: Record<string, unknown>) => Promise<{ status: number; body: any }>
> = {
  '2026 tools/call with the tasks extension (fast path)': (t, args) =>
    rpc2026(
      stack.mcpUrl,
      t,
      'tools/call',
      { name: 'generate_report', arguments: args },
      { tasksExtension: true },
    ),
  '2025 task-augmented tools/call (fast path)': (t, args) =>
    rpc2025(t, { name: 'generate_report', arguments: args, task: {} }),
  'job tools plain tools/call (counted by its verb)': async (t, args) => {
    const id = await jobToolsWire(stack.mcpUrl).start(t, 'generate_report', args);
    return { status: 200, body: { id } };
  },
};
const slug = (kind: string) => kind.replace(/\W+/g, '-').slice(0, 40);

test.each(Object.keys(STARTS))('%s spends exactly one count of each start limit', async (kind) => {
  const subject = `sc-${slug(kind)}`;
  const token = await stack.token(subject, 'acme');
  const before = await startsCounted(subject);
  expect(before.starts).toBeUndefined();
  const r = await STARTS[kind]!(token, { report: subject });
  expect(r.status).toBe(200);
  expect(JSON.stringify(r.body)).toMatch(/[0-9a-f]{32}/);
  const after = await startsCounted(subject);
  expect(after.starts).toBe(1);
  expect(after.client_starts).toBe((before.client_starts ?? 0) + 1);
  expect(after.tenant_starts).toBe((before.tenant_starts ?? 0) + 1);
});

test.each(Object.keys(STARTS).filter((k) => k.includes('fast path')))(
  '%s: the revocation check and the counts are one statement',
  async (kind) => {
    const subject = `sc-one-${slug(kind)}`;
    const token = await stack.token(subject, 'acme');
    let r: { status: number; body: any } | undefined;
    const statements = (
      await submittedStatements(async () => {
        r = await STARTS[kind]!(token, { report: subject });
      })
    ).filter((text) => /app\.(principals|rate_limits)\b/.test(text));
    expect(r!.status).toBe(200);
    // The start statement reads the principal again under its lock (create-task.ts).
    const checks = statements.filter((text) => !/INSERT INTO app\.tasks/.test(text));
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatch(/app\.rate_limits[\s\S]*app\.principals/);
  },
);

const revoke = (subject: string) => setRevoked(stack.db.url, subject, true);

test('a revoked caller’s starts, every kind, are refused as revoked and audited; nothing is created', async () => {
  const token = await stack.token('sc-revoked', 'acme');
  await revoke('sc-revoked');
  for (const [kind, start] of Object.entries(STARTS).filter(([k]) => k.includes('fast path'))) {
    const r = await start(token, { report: kind });
    expect({ kind, status: r.status, body: r.body }).toEqual({
      kind,
      status: 401,
      body: { error: 'invalid_token', error_description: REVOKED },
    });
  }
  const denied = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events
      WHERE type = 'auth.denied' AND reason = 'principal_revoked' AND subject = 'sc-revoked'`,
  );
  expect(denied[0].n).toBe(2);
  const tasks = await sql(stack.db.url, `SELECT id FROM app.tasks WHERE subject = 'sc-revoked'`);
  expect(tasks).toEqual([]);
});

test('a start over the limit answered for its arguments leaves the window’s audited refusal to the next start refused', async () => {
  const subject = 'sc-owed';
  const token = await stack.token(subject, 'acme');
  const start = STARTS['2025 task-augmented tools/call (fast path)']!;
  for (let i = 0; i < LIMIT; i++)
    expect((await start(token, { report: `r${i}` })).status).toBe(200);
  // Over the limit, with arguments the tool refuses: answered -32602 before its verb.
  const invalid = await start(token, { report: 42 });
  expect(invalid.body.error.code).toBe(-32602);
  expect(await startsCounted(subject)).toMatchObject({ starts: LIMIT + 1 });
  // The next start is refused by the limit, and it is the one audited: once.
  const refused = await start(token, { report: 'again' });
  expect(refused.body.error).toMatchObject({
    code: -32000,
    data: { retryAfterSeconds: expect.any(Number) },
  });
  await start(token, { report: 'and again' });
  const audited = await sql(
    stack.db.url,
    `SELECT type, body::jsonb->'data'->>'limit' AS limit FROM audit.events
      WHERE reason = 'rate_limited' AND subject = $1`,
    [subject],
  );
  expect(audited).toEqual([{ type: 'task.denied', limit: 'starts' }]);
});
