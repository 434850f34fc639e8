import { defineLongTool, definePack } from '../../tool-kit/src/index.ts';
import { createToolHarness, type ToolHarness } from '../../tool-harness/src/index.ts';
import { z } from 'zod';
import { sql } from '../../../test/support/sql.ts';

// ctx.ask through the tool author's harness: a parked task, a validated answer journaled
// like a step, and a crash after the answer that never asks again.
const pack = definePack({
  name: 'ask-probes',
  version: '0.0.1',
  targets: [],
  tools: [
    defineLongTool({
      name: 'probe_confirm',
      title: 'Confirm',
      description: 'Counts, asks whether to go on, then writes.',
      input: z.object({ records: z.number().int() }),
      scope: 'probe:run',
      summarize: (a) => ({ records: a.records }),
      async execute(ctx, { records }) {
        await ctx.step('count', async () => ({ records }));
        const answer = await ctx.ask({
          message: `This will change ${records} records. Continue?`,
          schema: {
            type: 'object',
            properties: {
              confirm: { type: 'boolean', title: 'Continue' },
              note: { type: 'string', maxLength: 100 },
            },
            required: ['confirm'],
          },
        });
        if (answer.action !== 'accept' || answer.content.confirm !== true)
          return { written: 0, answer: answer.action };
        await ctx.step('write', async () => ({ written: records }));
        return { written: records };
      },
    }),
  ],
});

let harness: ToolHarness;
beforeAll(async () => {
  harness = await createToolHarness({ pack });
});
afterAll(() => harness.close());

const events = (taskId: string) =>
  sql<{ type: string; data: Record<string, unknown> }>(
    harness.databaseUrl,
    `SELECT type, body::jsonb -> 'data' AS data FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [taskId],
  );

test('a tool that asks parks its task input_required with the question, holding no lease', async () => {
  const { id } = await harness.start('probe_confirm', { records: 40000 });
  expect(await harness.run(id)).toBe('paused');
  const t = await harness.task(id);
  expect(t.status).toBe('input_required');
  expect(t.inputFrom).toBe('caller');
  expect(t.input).toMatchObject({
    key: 'ask:1',
    message: 'This will change 40000 records. Continue?',
    requestedSchema: { type: 'object', required: ['confirm'] },
  });
  const lease = await sql(harness.databaseUrl, 'SELECT lease_owner FROM app.tasks WHERE id = $1', [
    id,
  ]);
  expect(lease[0].lease_owner).toBeNull();
  expect((await events(id)).map((e) => e.type)).toContain('task.input_requested');
});

test('an answer that does not fit the form is refused and the task keeps waiting', async () => {
  const { id } = await harness.start('probe_confirm', { records: 7 });
  await harness.run(id);
  const bad = await harness.answer(id, { action: 'accept', content: { confirm: 'yes' } });
  expect(bad).toMatchObject({ ok: false, code: 'invalid_params' });
  expect((bad as { message: string }).message).toMatch(/confirm must be true or false/);
  const unknown = await harness.answer(id, { action: 'accept', content: { confirm: true, x: 1 } });
  expect((unknown as { message: string }).message).toMatch(/x is not a field/);
  expect((await harness.task(id)).status).toBe('input_required');
});

test('the answer is journaled: a crash after it resumes without asking again', async () => {
  const { id } = await harness.start('probe_confirm', { records: 12 });
  await harness.run(id);
  const ok = await harness.answer(id, {
    action: 'accept',
    content: { confirm: true, note: 'go ahead, ticket 99' },
  });
  expect(ok.ok).toBe(true);
  expect((await harness.task(id)).status).toBe('working');
  // The worker dies at its next step after the answer was recorded.
  expect(await harness.run(id, { crashAfterSteps: 0 })).toBe('crashed');
  expect(await harness.run(id)).toBe('settled');
  const t = await harness.task(id);
  expect(t.status).toBe('completed');
  expect(t.result?.structuredContent).toEqual({ written: 12 });
  expect(t.steps).toEqual(['count', 'ask:1', 'write']);
  const trail = await events(id);
  expect(trail.filter((e) => e.type === 'task.input_requested')).toHaveLength(1);
  const received = trail.filter((e) => e.type === 'task.input_received');
  expect(received).toHaveLength(1);
  // Free text stays out of the trail: only its length.
  expect(received[0]!.data.answer).toEqual({
    action: 'accept',
    fields: { confirm: true, note: '[19 characters withheld]' },
  });
  // A second answer to a question already answered is refused.
  expect(await harness.answer(id, { action: 'decline' })).toMatchObject({ ok: false });
});

test('a declined question reaches the tool as decline', async () => {
  const { id } = await harness.start('probe_confirm', { records: 3 });
  await harness.run(id);
  expect((await harness.answer(id, { action: 'decline' })).ok).toBe(true);
  await harness.run(id);
  expect((await harness.task(id)).result?.structuredContent).toEqual({
    written: 0,
    answer: 'decline',
  });
});
