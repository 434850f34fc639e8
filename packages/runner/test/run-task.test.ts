import { defineLongTool, definePack, ToolError } from '@mtg/tool-kit';
import { createToolHarness, recordingTarget, type ToolHarness } from '@mtg/tool-harness';
import { z } from 'zod';
import { pollUntil } from '../../../test/support/poll.ts';
import { sql } from '../../../test/support/sql.ts';
import { submittedStatements } from '../../../test/support/submitted-statements.ts';

// The runner's own behaviour, through the tool author's harness: real PostgreSQL, real runner.
let failures = 0;
let lateFailures = 0;
function opened() {
  let resolve!: (value: unknown) => void;
  const promise = new Promise<unknown>((r) => (resolve = r));
  return { promise, resolve };
}
let gate = opened();
const ledger = recordingTarget('ledger');
const pack = definePack({
  name: 'runner-probes',
  version: '0.0.1',
  targets: ['ledger'],
  tools: [
    defineLongTool({
      name: 'probe_refused',
      title: 'Refused',
      description: 'Fails with its own error.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.step('look', async () => {
          throw new ToolError('no_such_account', 'Account 42 does not exist');
        });
        return {};
      },
    }),
    defineLongTool({
      name: 'probe_flaky',
      title: 'Flaky',
      description: 'Fails once, retryably, then succeeds.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        const first = await ctx.step('first', async () => ({ ok: true }));
        await ctx.step('second', async () => {
          if (failures++ === 0) throw new ToolError('busy', 'ledger busy', { retryable: true });
          return { ok: true };
        });
        return { first };
      },
    }),
    defineLongTool({
      name: 'probe_parallel',
      title: 'Two steps at once',
      description: 'Runs two steps at the same time, then returns.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        const [a, b] = await Promise.all([
          ctx.step('a', async () => 1),
          ctx.step('b', async () => 2),
        ]);
        return { sum: a + b };
      },
    }),
    defineLongTool({
      name: 'probe_flaky_after',
      title: 'Flaky after a step',
      description: 'One step, then fails once, retryably, outside any step.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        const first = await ctx.step('first', async () => ({ ok: true }));
        if (lateFailures++ === 0) throw new ToolError('busy', 'ledger busy', { retryable: true });
        return { first };
      },
    }),
    defineLongTool({
      name: 'probe_big',
      title: 'Big',
      description: 'Returns more than its result limit.',
      input: z.object({}),
      scope: 'probe:run',
      limits: { maxResultBytes: 100 },
      summarize: () => ({}),
      execute: async () => ({ blob: 'x'.repeat(500) }),
    }),
    defineLongTool({
      name: 'probe_undeclared',
      title: 'Undeclared',
      description: 'Asks for a target its pack does not declare.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.target('crm').get('/x');
        return {};
      },
    }),
    defineLongTool({
      name: 'probe_writes',
      title: 'Writes',
      description: 'Writes twice, with progress.',
      input: z.object({ n: z.number().int().min(1).max(5) }),
      scope: 'probe:run',
      summarize: (a) => ({ n: a.n }),
      async execute(ctx, { n }) {
        for (let i = 0; i < n; i++) {
          await ctx.step(`w:${i}`, async (signal) =>
            ctx
              .target('ledger')
              .post('/w', { i }, { idempotencyKey: `${ctx.taskId}:${i}`, signal }),
          );
          await ctx.progress(i + 1, n, `wrote ${i + 1}`);
        }
        return { n };
      },
    }),
    defineLongTool({
      name: 'probe_gated',
      title: 'Gated',
      description: 'Two steps without progress or targets; the first waits for the test.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.step('first', () => gate.promise as Promise<{ ok: boolean }>);
        await ctx.step('second', async () => ({ ok: true }));
        return {};
      },
    }),
    defineLongTool({
      name: 'probe_last_gated',
      title: 'One gated step, then the end',
      description: 'One step that waits for the test; the tool returns as soon as it does.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.step('only', () => gate.promise as Promise<{ ok: boolean }>);
        return {};
      },
    }),
    defineLongTool({
      name: 'probe_two_calls',
      title: 'Two calls in one step',
      description: 'Calls the ledger, waits for the test, calls it again; no progress.',
      input: z.object({ run: z.number().int() }),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.step('calls', async (signal) => {
          await ctx
            .target('ledger')
            .post('/c', { i: 0 }, { idempotencyKey: `${ctx.taskId}:0`, signal });
          await gate.promise;
          await ctx
            .target('ledger')
            .post('/c', { i: 1 }, { idempotencyKey: `${ctx.taskId}:1`, signal });
          return {};
        });
        return {};
      },
    }),
    defineLongTool({
      name: 'probe_step_then_wait',
      title: 'A step, then a wait outside any step',
      description: 'One step, then waits for the test before it returns.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.step('only', async () => ({ ok: true }));
        await gate.promise;
        return {};
      },
    }),
    defineLongTool({
      name: 'probe_progress_then_wait',
      title: 'Progress, then a wait outside any step',
      description: 'Reports progress, then waits with no boundary to carry the report.',
      input: z.object({}),
      scope: 'probe:run',
      summarize: () => ({}),
      async execute(ctx) {
        await ctx.progress(1, 2, 'half way');
        await ctx.sleep(6000);
        return {};
      },
    }),
  ],
});

/** A cancel recorded in the row as the gateway would, without the notification a worker hears. */
async function requestCancelUnnotified(databaseUrl: string, id: string) {
  await sql(
    databaseUrl,
    `UPDATE app.tasks SET cancel_requested_at = now(),
            cancel_requested_by = '{"path":"owner","reason":"probe"}' WHERE id = $1`,
    [id],
  );
}

/** Logs every write to a task's row (public.task_writes), in order, with when it was made. */
async function logTaskWrites(databaseUrl: string) {
  await sql(
    databaseUrl,
    `CREATE TABLE public.task_writes (
       id bigserial PRIMARY KEY, task_id text, at timestamptz, status text, progress jsonb,
       xid bigint);
     CREATE FUNCTION public.log_task_write() RETURNS trigger LANGUAGE plpgsql
       SECURITY DEFINER AS $$
     BEGIN
       INSERT INTO public.task_writes (task_id, at, status, progress, xid)
       VALUES (NEW.id, clock_timestamp(), NEW.status, NEW.progress,
               pg_current_xact_id()::text::bigint % 4294967296);
       RETURN NEW;
     END $$;
     CREATE TRIGGER log_task_write AFTER UPDATE ON app.tasks
       FOR EACH ROW EXECUTE FUNCTION public.log_task_write();`,
  );
}

let harness: ToolHarness;
beforeAll(async () => {
  harness = await createToolHarness({ pack, targets: { ledger } });
});
afterAll(async () => {
  await harness?.close();
});

test("a tool's own error completes the task as the tool's error, with its code, and is not retried", async () => {
  const { id } = await harness.start('probe_refused', {});
  expect(await harness.run(id)).toBe('settled');
  const task = await harness.task(id);
  expect(task).toMatchObject({ status: 'completed', outcome: 'tool_error' });
  expect(task.result).toMatchObject({
    isError: true,
    content: [{ type: 'text', text: 'Account 42 does not exist' }],
    _meta: { 'io.mcp-task-gateway/tool-error': { code: 'no_such_account' } },
  });
});

test('a retryable tool error retries the attempt from the journal: finished steps do not run again', async () => {
  const { id } = await harness.start('probe_flaky', {});
  expect(await harness.run(id)).toBe('retry');
  expect(await harness.run(id)).toBe('settled');
  expect((await harness.task(id)).status).toBe('completed');
  expect(harness.stepRuns(id)).toEqual({ first: 1, second: 2 });
});

test('a step the run had not journaled yet when the tool failed is journaled before the retry: it does not run again', async () => {
  const { id } = await harness.start('probe_flaky_after', {});
  expect(await harness.run(id)).toBe('retry');
  expect(await harness.run(id)).toBe('settled');
  expect((await harness.task(id)).status).toBe('completed');
  expect(harness.stepRuns(id)).toEqual({ first: 1 });
});

test('steps that finish together are each journaled once, with their events', async () => {
  const { id } = await harness.start('probe_parallel', {});
  expect(await harness.run(id)).toBe('settled');
  const journaled = await sql<{ step: string; output: unknown }>(
    harness.databaseUrl,
    'SELECT step, output FROM app.task_steps WHERE task_id = $1 ORDER BY step',
    [id],
  );
  expect(journaled).toEqual([
    { step: 'a', output: { value: 1 } },
    { step: 'b', output: { value: 2 } },
  ]);
  const trail = await sql<{ step: string }>(
    harness.databaseUrl,
    `SELECT body::jsonb -> 'data' ->> 'step' AS step FROM audit.events
      WHERE task_id = $1 AND type = 'task.step_completed' ORDER BY step`,
    [id],
  );
  expect(trail).toEqual([{ step: 'a' }, { step: 'b' }]);
});

test('a result over the tool limit fails the task, saying so', async () => {
  const { id } = await harness.start('probe_big', {});
  expect(await harness.run(id)).toBe('settled');
  const task = await harness.task(id);
  expect(task).toMatchObject({ status: 'failed', outcome: 'result_too_large' });
  expect(task.statusMessage).toMatch(/exceeds the 100-byte limit of probe_big/);
});

test('a target the pack did not declare is refused to the tool (a programming error: retried, never called)', async () => {
  const { id } = await harness.start('probe_undeclared', {});
  expect(await harness.run(id)).toBe('retry');
  expect((await harness.task(id)).status).toBe('working');
});

test('progress and writes are recorded; an idempotent start returns the same task', async () => {
  const { id, created } = await harness.start('probe_writes', { n: 3 });
  expect(created).toBe(true);
  expect(await harness.start('probe_writes', { n: 3 })).toEqual({ id, created: false });
  expect(await harness.run(id)).toBe('settled');
  const task = await harness.task(id);
  expect(task.progress).toEqual({ current: 3, total: 3 });
  expect(task.statusMessage).toBe('Completed');
  expect(ledger.writes(id).map((w) => w.idempotencyKey)).toEqual([`${id}:0`, `${id}:1`, `${id}:2`]);
  expect(task.arguments).toEqual({ n: 3 });
});

test("progress reports and steps ride on the next statement that writes anyway: the next step's check, and the completion for the last", async () => {
  // A long lease (renewed every 10 s): no renewal between the claim and the ending. Every
  // write to the task's row is logged, with the transaction that made it.
  const long = await createToolHarness({ pack, targets: { ledger }, leaseMs: 30_000 });
  try {
    await logTaskWrites(long.databaseUrl);
    const { id } = await long.start('probe_writes', { n: 2 });
    expect(await long.run(id)).toBe('settled');
    const writes = await sql<{ status: string; progress: unknown; xid: string }>(
      long.databaseUrl,
      'SELECT status, progress, xid::text AS xid FROM public.task_writes WHERE task_id = $1 ORDER BY id',
      [id],
    );
    const journaledBy = new Map(
      (
        await sql<{ step: string; xid: string }>(
          long.databaseUrl,
          'SELECT step, xmin::text AS xid FROM app.task_steps WHERE task_id = $1',
          [id],
        )
      ).map((r) => [r.step, r.xid]),
    );
    // The claim, the first report (1 of 2), the ending with the last (2 of 2): no other write.
    expect(writes.map((w) => [w.status, w.progress])).toEqual([
      ['working', null],
      ['working', { current: 1, total: 2 }],
      ['completed', { current: 2, total: 2 }],
    ]);
    // The first step was journaled when the second began, with the report the tool made
    // after it; the last step was journaled by the completion, with its report.
    expect(writes[1]!.xid).toBe(journaledBy.get('w:0'));
    expect(writes[2]!.xid).toBe(journaledBy.get('w:1'));
    const trail = await sql<{ type: string; step: string | null }>(
      long.databaseUrl,
      `SELECT type, body::jsonb -> 'data' ->> 'step' AS step FROM audit.events
        WHERE task_id = $1 ORDER BY seq`,
      [id],
    );
    expect(trail.slice(-3)).toEqual([
      { type: 'task.step_completed', step: 'w:0' },
      { type: 'task.step_completed', step: 'w:1' },
      { type: 'task.completed', step: null },
    ]);
    expect((await long.task(id)).progress).toEqual({ current: 2, total: 2 });
  } finally {
    await long.close();
  }
});

test('a step the tool does not follow at once with a statement is journaled as soon as its code waits', async () => {
  // A long lease (renewed every 10 s): no renewal within the wait below can write the step.
  const long = await createToolHarness({ pack, targets: { ledger }, leaseMs: 30_000 });
  try {
    gate = opened();
    const { id } = await long.start('probe_step_then_wait', {});
    const run = long.run(id);
    try {
      // The run waits on the gate, outside any step: nothing but the event loop's turn can
      // have written the step.
      await pollUntil(
        () =>
          sql<{ step: string }>(
            long.databaseUrl,
            'SELECT step FROM app.task_steps WHERE task_id = $1',
            [id],
          ),
        (rows) => rows.length === 1,
        4000,
        20,
        'the step journaled while the run waits',
      );
      expect((await long.task(id)).status).toBe('working');
    } finally {
      gate.resolve(undefined);
    }
    expect(await run).toBe('settled');
    const trail = await sql<{ type: string }>(
      long.databaseUrl,
      'SELECT type FROM audit.events WHERE task_id = $1 ORDER BY seq',
      [id],
    );
    // (The test's own reads of the task are audited too.)
    expect(
      trail.map((e) => e.type).filter((t) => !/^task\.(created|status_read)$/.test(t)),
    ).toEqual(['task.started', 'task.step_completed', 'task.completed']);
  } finally {
    await long.close();
  }
});

test('progress with no boundary after it to carry it is still written promptly', async () => {
  // A long lease: its renewal timer (leaseMs / 3 = 10 s) cannot be what writes the report.
  const slow = await createToolHarness({ pack, targets: { ledger }, leaseMs: 30_000 });
  try {
    const { id } = await slow.start('probe_progress_then_wait', {});
    const run = slow.run(id);
    try {
      await pollUntil(
        async () => (await slow.task(id)).progress,
        (p) => p?.current === 1,
        4000,
        20,
        'the progress report written',
      );
      expect((await slow.task(id)).statusMessage).toBe('half way');
    } finally {
      await run;
    }
  } finally {
    await slow.close();
  }
});

test('a cancel recorded during a step, with no notification, stops the run before the next step begins', async () => {
  // A long lease: its renewal timer cannot be what reads the cancel. The journal statement of
  // the first step reads the boundary, and the second step's start decides on that read.
  const long = await createToolHarness({ pack, targets: { ledger }, leaseMs: 30_000 });
  try {
    gate = opened();
    const { id } = await long.start('probe_gated', {});
    const run = long.run(id);
    await pollUntil(
      async () => long.stepRuns(id).first ?? 0,
      (n) => n === 1,
      5000,
      10,
      'the first step running',
    );
    await requestCancelUnnotified(long.databaseUrl, id);
    gate.resolve({ ok: true });
    expect(await run).toBe('settled');
    expect(long.stepRuns(id)).toEqual({ first: 1 });
    expect(await long.task(id)).toMatchObject({ status: 'cancelled', steps: ['first'] });
  } finally {
    await long.close();
  }
});

test('a call between renewals reads the boundary without writing: nothing is written, and a cancel recorded meanwhile stops the next call', async () => {
  // A long lease (renewed every 10 s): between the claim and the ending, the checks before
  // the calls are reads. Every write to the task's row is logged by a trigger.
  const long = await createToolHarness({ pack, targets: { ledger }, leaseMs: 30_000 });
  try {
    await logTaskWrites(long.databaseUrl);
    const writes = async (id: string) =>
      (
        await sql<{ status: string }>(
          long.databaseUrl,
          'SELECT status FROM public.task_writes WHERE task_id = $1 ORDER BY id',
          [id],
        )
      ).map((w) => w.status);

    gate = opened();
    gate.resolve(undefined);
    const done = await long.start('probe_two_calls', { run: 1 });
    expect(await long.run(done.id)).toBe('settled');
    expect(ledger.writes(done.id)).toHaveLength(2);
    // The claim and the completion; no renewal for either call.
    expect(await writes(done.id)).toEqual(['working', 'completed']);

    gate = opened();
    const { id } = await long.start('probe_two_calls', { run: 2 });
    const run = long.run(id);
    await pollUntil(
      async () => ledger.writes(id).length,
      (n) => n === 1,
      5000,
      10,
      'the first call made',
    );
    await requestCancelUnnotified(long.databaseUrl, id);
    gate.resolve(undefined);
    expect(await run).toBe('settled');
    expect(ledger.writes(id)).toHaveLength(1);
    expect(await long.task(id)).toMatchObject({ status: 'cancelled' });
  } finally {
    await long.close();
  }
});

test('the end reads no boundary of its own: the completion checks it, and a cancel recorded during the last step ends the run cancelled with that step journaled', async () => {
  // A long lease: no renewal reads or writes the row between the claim and the ending.
  const long = await createToolHarness({ pack, targets: { ledger }, leaseMs: 30_000 });
  try {
    const lastStepRunning = async (id: string) =>
      pollUntil(
        async () => long.stepRuns(id).only ?? 0,
        (n) => n === 1,
        5000,
        10,
        'the step running',
      );
    // The statements after the step returned (a marker statement sent as the gate opens):
    // the completion, and no boundary read (a read or a renewal selects `b_cancel`).
    gate = opened();
    const done = await long.start('probe_last_gated', {});
    let ended: unknown;
    const statements = await submittedStatements(async () => {
      const run = long.run(done.id);
      await lastStepRunning(done.id);
      await sql(long.databaseUrl, `SELECT 'the step returns' AS marker`);
      gate.resolve({ ok: true });
      ended = await run;
    });
    expect(ended).toBe('settled');
    const after = statements.slice(statements.findIndex((t) => t.includes('the step returns')));
    expect(after.filter((t) => /\bb_cancel\b/.test(t))).toEqual([]);
    expect(after.filter((t) => /INSERT INTO app\.task_results/.test(t))).toHaveLength(1);
    expect(await long.task(done.id)).toMatchObject({ status: 'completed', steps: ['only'] });

    // A cancel recorded while the last step runs, with no notification: the completion does
    // not settle, the boundary then read says why, and the step is journaled before the stop.
    gate = opened();
    const { id } = await long.start('probe_last_gated', {}, { idempotencyKey: 'cancelled' });
    const run = long.run(id);
    await lastStepRunning(id);
    await requestCancelUnnotified(long.databaseUrl, id);
    gate.resolve({ ok: true });
    expect(await run).toBe('settled');
    expect(long.stepRuns(id)).toEqual({ only: 1 });
    expect(await long.task(id)).toMatchObject({ status: 'cancelled', steps: ['only'] });
  } finally {
    await long.close();
  }
});
