import pg from 'pg';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: {
      DEMO_STEP_MS: '50',
      TOOL_LIMITS: JSON.stringify({
        generate_report: { deleteResultOnRead: true },
        provision_test_environment: { maxResultBytes: 50 },
      }),
    },
  });
});
afterAll(async () => {
  await stack?.close();
});

const finished = (wire: ReturnType<typeof jobToolsWire>, token: string, id: string) =>
  pollUntil(
    () => wire.get(token, id),
    (a) => a.ok && a.value.status !== 'working',
  );

test('a result marked delete-on-read is returned once, then reported gone', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('nia', 'acme');
  const id = await wire.start(token, 'generate_report', { report: 'once' });
  await finished(wire, token, id);
  expect(await wire.result(token, id)).toMatchObject({ ok: true, value: { report: 'once' } });
  const second = await wire.result(token, id);
  expect(second).toMatchObject({ ok: false });
  expect((second as { error: string }).error).toMatch(/no longer stored/);
});

test('a result over the tool’s size cap fails the task with a clear error', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('nia', 'acme');
  const id = await wire.start(token, 'provision_test_environment', {
    branch: 'big',
    services: ['a'],
  });
  const status = await finished(wire, token, id);
  expect(status).toMatchObject({
    ok: true,
    value: { status: 'failed', outcome: 'result_too_large' },
  });
  expect((status as any).value.statusMessage).toMatch(/exceeds the 50-byte limit/);
});

test('past its retention a task and its result are gone for every verb and purged', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('nia', 'acme');
  const startShort = async (collection: string) => {
    const taskId = await wire.start(token, 'bulk_update_records', {
      collection,
      count: 10,
      patch: { z: 1 },
    });
    await finished(wire, token, taskId);
    return taskId;
  };
  // Retention is judged by the database's clock: age the rows instead of waiting a day.
  const age = async (taskId: string) => {
    await sql(
      stack.db.url,
      `UPDATE app.tasks SET ended_at = ended_at - (ttl_ms + 1000) * interval '1 millisecond' WHERE id = $1`,
      [taskId],
    );
    await sql(stack.db.url, `UPDATE app.task_results SET expires_at = now() WHERE task_id = $1`, [
      taskId,
    ]);
  };
  const rows = (taskId: string) => () =>
    sql(
      stack.db.url,
      `SELECT (SELECT count(*)::int FROM app.tasks WHERE id = $1) AS tasks,
              (SELECT count(*)::int FROM app.task_results WHERE task_id = $1) AS results`,
      [taskId],
    );
  const purged = (r: Array<{ tasks: number; results: number }>) =>
    r[0]!.tasks === 0 && r[0]!.results === 0;
  // The maintenance leader purges once a minute of the worker's clock, the first time when it
  // starts leading, which may come after this test began: line up with it first. An aged
  // sentinel goes at the purge a minute on; the next purge is then a minute away again.
  const sentinel = await startShort('sentinel');
  await age(sentinel);
  stack.clock.advance(60_000);
  await pollUntil(rows(sentinel), purged, 10_000, 100, 'the sentinel purge');

  const id = await startShort('short');
  expect(await wire.result(token, id)).toMatchObject({ ok: true });
  await age(id);
  const missing = 'a'.repeat(32);
  expect(await wire.get(token, id)).toEqual(await wire.get(token, missing));
  expect(await wire.result(token, id)).toEqual(await wire.result(token, missing));
  expect(await wire.cancel(token, id)).toEqual(await wire.cancel(token, missing));
  // Gone before the purge removed it: the rows are still there until the next purge.
  expect(await rows(id)()).toEqual([{ tasks: 1, results: 1 }]);
  // A minute later on the worker's clock, its next tick purges them.
  stack.clock.advance(60_000);
  await pollUntil(rows(id), purged, 10_000, 100, 'the purge');
  const events = await sql(
    stack.db.url,
    `SELECT body::jsonb -> 'data' -> 'taskIds' AS ids FROM audit.events WHERE type = 'task.purged'`,
  );
  expect(events.flatMap((e) => e.ids)).toContain(id);
  // Back to real time: the tests after this one judge token lifetimes by this clock.
  stack.clock.reset();
});

test('application roles cannot UPDATE, DELETE or TRUNCATE audit events; the auditor cannot write', async () => {
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    for (const role of ['mtg_gateway', 'mtg_worker', 'mtg_auditor']) {
      await client.query(`SET ROLE ${role}`);
      for (const statement of [
        'UPDATE audit.events SET type = type',
        'DELETE FROM audit.events',
        'TRUNCATE audit.events',
      ]) {
        await expect(client.query(statement)).rejects.toMatchObject({ code: '42501' });
      }
      await client.query('RESET ROLE');
    }
    await client.query('SET ROLE mtg_auditor');
    await expect(client.query(`SELECT audit.append('task.created', '{}')`)).rejects.toMatchObject({
      code: '42501',
    });
    await client.query('RESET ROLE');
    // Even the owner is refused by the trigger.
    await expect(client.query('DELETE FROM audit.events')).rejects.toThrow(/append-only/);
  } finally {
    await client.end();
  }
});

test('one task lifecycle writes its events in order, chained without gaps', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('oli', 'acme');
  const id = await wire.start(token, 'bulk_update_records', {
    collection: 'life',
    count: 1000,
    patch: { k: 'secret-value' },
  });
  await finished(wire, token, id);
  await wire.result(token, id);
  const events = await sql(
    stack.db.url,
    `SELECT type, body FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [id],
  );
  expect(events.map((e) => e.type).filter((t) => t !== 'task.status_read')).toEqual([
    'task.created',
    'task.delegated',
    'task.started',
    // One downstream token for both stages: it is reused while young (stage-token-reuse.test.ts).
    'task.identity_refreshed',
    'task.step_completed',
    'task.step_completed',
    'task.completed',
    'task.result_read',
  ]);
  // Identity changes name who, for whom and until when, never the credential itself.
  const refreshed = JSON.parse(events.find((e) => e.type === 'task.identity_refreshed').body);
  expect(refreshed.data.to).toMatchObject({ subject: 'oli', act: { sub: 'mcp-worker' } });
  expect(refreshed.data.expiresAt).toEqual(expect.any(String));
  expect(events.map((e) => e.body).join('')).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
  expect(events.some((e) => e.type === 'task.status_read')).toBe(true);
  // Redacted: the patch's values never reach the audit trail.
  expect(events.map((e) => e.body).join('')).not.toContain('secret-value');
  // Each chain (the tenant's, the system's) gapless and linked.
  const chain = await sql(
    stack.db.url,
    `SELECT chain_id, seq, prev_hash, hash FROM audit.events ORDER BY chain_id, seq`,
  );
  expect(chain.length).toBeGreaterThan(0);
  chain.forEach((e, i) => {
    const first = i === 0 || chain[i - 1].chain_id !== e.chain_id;
    if (first) expect(Number(e.seq)).toBe(1);
    else {
      expect(Number(e.seq)).toBe(Number(chain[i - 1].seq) + 1);
      expect(e.prev_hash).toBe(chain[i - 1].hash);
    }
  });
});
