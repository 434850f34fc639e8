import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

describe('a task outlives the token that created it, up to its bound', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      workers: 1,
      env: { AUTH_CLOCK_TOLERANCE_SECONDS: '0', DEMO_STEP_MS: '400' },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });
  afterEach(() => stack.clock.reset());

  test('the creating token expires mid-run: polling with it is 401, the task finishes under its delegation', async () => {
    const shortLived = await stack.token('pat', 'acme', { ttl: 10 });
    const client = await connectV1(stack.mcpUrl, shortLived);
    const started = await client.callTool({
      name: 'bulk_update_records',
      arguments: { collection: 'exp', count: 3000, patch: { p: 1 } },
    });
    const jobId = (started.structuredContent as any).jobId;
    await client.close();
    stack.clock.advance(11_000); // the gateway's clock: past exp, no tolerance

    const poll = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${shortLived}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'get_job_status', arguments: { jobId } },
      }),
    });
    expect(poll.status).toBe(401);
    expect(poll.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);

    const wire = jobToolsWire(stack.mcpUrl);
    const fresh = await stack.token('pat', 'acme');
    const done = await pollUntil(
      () => wire.get(fresh, jobId),
      (a) => a.ok && a.value.status !== 'working',
      30_000,
    );
    expect(done).toMatchObject({ ok: true, value: { status: 'completed' } });
    const writes = await stack.writes(jobId);
    expect(writes).toHaveLength(6);
    // Written after the user's token had expired, still for the user, by the worker.
    expect(writes.every((w) => w.sub === 'pat' && (w.act as any)?.sub === 'mcp-worker')).toBe(true);
    // The delegation is wiped with the task.
    expect(
      await sql(stack.db.url, 'SELECT 1 FROM app.task_credentials WHERE task_id = $1', [jobId]),
    ).toHaveLength(0);
  });

  test('with a short deadline the work stops at the bound: no downstream write after it ended', async () => {
    const token = await stack.token('pat', 'acme', { ttl: 2 });
    const client = await connectV1(stack.mcpUrl, token);
    const started = await client.callTool({
      name: 'bulk_update_records',
      arguments: { collection: 'bound', count: 20_000, patch: { p: 2 } },
      _meta: { 'io.mcp-task-gateway/deadline-ms': 600_000 },
    });
    const jobId = (started.structuredContent as any).jobId;
    await client.close();
    const [bound] = await sql(
      stack.db.url,
      `SELECT extract(epoch FROM deadline - created_at) * 1000 AS ms FROM app.tasks WHERE id = $1`,
      [jobId],
    );
    expect(Number(bound.ms)).toBeCloseTo(600_000, -2);
    await pollUntil(
      () => stack.writes(jobId),
      (w) => w.length >= 1,
      10_000,
      50,
    );
    // The bound is the database's time: bring it to now instead of waiting for it.
    await sql(stack.db.url, 'UPDATE app.tasks SET deadline = now() WHERE id = $1', [jobId]);
    const [row] = await pollUntil(
      () =>
        sql(stack.db.url, 'SELECT status, outcome, ended_at FROM app.tasks WHERE id = $1', [jobId]),
      (rows) => rows[0].status !== 'working',
      15_000,
    );
    expect(row).toMatchObject({ status: 'failed', outcome: 'deadline' });
    // Once the worker has let go of the run, no write of it can still land.
    await pollUntil(
      () => Promise.resolve(stack.workers[0]!.running()),
      (n) => n === 0,
      10_000,
      20,
    );
    const writes = await stack.writes(jobId);
    expect(writes.length).toBeGreaterThan(0);
    expect(writes.every((w) => Date.parse(w.at) <= new Date(row.ended_at).getTime())).toBe(true);
  });

  test('the downstream refuses the worker’s bare client-credentials token for user work', async () => {
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      resource: stack.downstreamUrl,
      scope: 'records:write',
    });
    const tokenResponse = await fetch(`${stack.issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`mcp-worker:${stack.secrets.clientSecrets['mcp-worker']}`).toString('base64')}`,
      },
      body: form,
    });
    const { access_token } = (await tokenResponse.json()) as { access_token: string };
    const write = await fetch(`${stack.downstreamUrl}/api/collections/x/records`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${access_token}`,
        'content-type': 'application/json',
        'idempotency-key': 'k-bare',
        'x-task-id': 'bare',
      },
      body: JSON.stringify({ from: 0, to: 1, patch: {} }),
    });
    expect(write.status).toBe(403);
    expect(await write.json()).toMatchObject({ error: 'user_context_required' });
    expect(await stack.writes('bare')).toHaveLength(0);
  });
});

describe('checkpoint mode: a tool that needs a live user at each stage', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      workers: 1,
      env: {
        DEMO_STEP_MS: '100',
        TOOL_LIMITS: JSON.stringify({ bulk_update_records: { requireLiveUserEachStage: true } }),
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  test('pauses as input_required after each stage and resumes on the owner’s next poll with a fresh token', async () => {
    const wire = jobToolsWire(stack.mcpUrl);
    const jobId = await wire.start(await stack.token('quin', 'acme'), 'bulk_update_records', {
      collection: 'cp',
      count: 1500,
      patch: { c: 1 },
    });
    let resumes = 0;
    for (let stage = 0; stage < 10; stage++) {
      const [row] = await pollUntil(
        () =>
          sql(stack.db.url, 'SELECT status, status_message FROM app.tasks WHERE id = $1', [jobId]),
        (rows) => rows[0].status !== 'working',
        10_000,
        20,
      );
      if (row.status === 'completed') break;
      expect(row.status).toBe('input_required');
      expect(row.status_message).toMatch(/fresh token to continue/);
      // Nothing runs while it waits.
      const before = (await stack.writes(jobId)).length;
      await new Promise((r) => setTimeout(r, 300));
      expect((await stack.writes(jobId)).length).toBe(before);
      // The owner polls with a fresh token: the task resumes.
      const polled = await wire.get(await stack.token('quin', 'acme'), jobId);
      expect(polled).toMatchObject({ ok: true, value: { status: 'working' } });
      resumes++;
    }
    expect(resumes).toBe(2); // 3 batches: the first runs on the creation grant
    const types = (
      await sql(stack.db.url, `SELECT type FROM audit.events WHERE task_id = $1 ORDER BY seq`, [
        jobId,
      ])
    ).map((e) => e.type);
    expect(types.filter((t) => t === 'task.paused')).toHaveLength(2);
    expect(types.filter((t) => t === 'task.resumed')).toHaveLength(2);
    expect(types).toContain('task.completed');
  });

  test('another user cannot resume it: their poll is denied like a missing task', async () => {
    const wire = jobToolsWire(stack.mcpUrl);
    const jobId = await wire.start(await stack.token('quin', 'acme'), 'bulk_update_records', {
      collection: 'cp2',
      count: 1500,
      patch: { c: 2 },
    });
    await pollUntil(
      () => sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [jobId]),
      (r) => r[0].status === 'input_required',
      10_000,
      20,
    );
    const stranger = await wire.get(await stack.token('rex', 'acme'), jobId);
    expect(stranger.ok).toBe(false);
    expect(
      (await sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [jobId]))[0].status,
    ).toBe('input_required');
  });
});
