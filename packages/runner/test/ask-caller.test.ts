import { defineLongTool, definePack } from '@mtg/tool-kit';
import { createToolHarness, type ToolHarness } from '@mtg/tool-harness';
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

// ctx.approval: four eyes, through the harness's decide (the service verb approve_task uses).
const approvals = definePack({
  name: 'approval-probes',
  version: '0.0.1',
  targets: [],
  tools: [
    defineLongTool({
      name: 'probe_grant',
      title: 'Grant',
      description: 'Asks a second person before a bulk permission change.',
      input: z.object({ users: z.number().int() }),
      scope: 'probe:run',
      approvalScopes: ['probe:approve'],
      summarize: (a) => ({ users: a.users }),
      async execute(ctx, { users }) {
        const ok = await ctx.approval({
          scope: 'probe:approve',
          reason: `Grant admin to ${users} users`,
          summary: { users },
        });
        return await ctx.step('grant', async () => ({ granted: users, by: ok.approver.subject }));
      },
    }),
  ],
});

describe('four-eyes approval', () => {
  let h: ToolHarness;
  beforeAll(async () => {
    h = await createToolHarness({ pack: approvals });
  });
  afterAll(() => h.close());

  test('a second person approves; the owner cannot approve their own task', async () => {
    const { id } = await h.start('probe_grant', { users: 40 });
    expect(await h.run(id)).toBe('paused');
    expect((await h.task(id)).inputFrom).toBe('approver');
    const self = await h.decide(id, { approved: true }, { subject: 'alice', client: 'other-app' });
    expect(self).toMatchObject({ ok: false, code: 'approval_refused' });
    const noScope = await h.decide(id, { approved: true }, { scopes: ['probe:run'] });
    const missing = await h.decide('f'.repeat(32), { approved: true });
    expect(noScope).toEqual(missing);
    expect(missing).toMatchObject({ ok: false, code: 'task_not_found' });
    const otherTenant = await h.decide(id, { approved: true }, { tenant: 'globex' });
    expect(otherTenant).toEqual(missing);
    expect(await h.decide(id, { approved: true })).toEqual({ ok: true });
    expect(await h.run(id)).toBe('settled');
    expect((await h.task(id)).result?.structuredContent).toEqual({ granted: 40, by: 'bob' });
    const trail = await sql(
      h.databaseUrl,
      `SELECT type, actor_subject FROM audit.events WHERE task_id = $1 ORDER BY seq`,
      [id],
    );
    expect(trail).toEqual(
      expect.arrayContaining([
        { type: 'task.approval_requested', actor_subject: expect.any(String) },
        { type: 'task.approved', actor_subject: 'bob' },
      ]),
    );
  });

  test('a rejection ends the task with the reason, and nothing is written', async () => {
    const { id } = await h.start('probe_grant', { users: 2 });
    await h.run(id);
    expect(await h.decide(id, { approved: false, reason: 'not this quarter' })).toEqual({
      ok: true,
    });
    await h.run(id);
    const t = await h.task(id);
    expect(t.status).toBe('completed');
    expect(t.result?.isError).toBe(true);
    expect(t.result?.content[0]?.text).toMatch(/Rejected by bob: not this quarter/);
    expect(h.stepRuns(id).grant).toBeUndefined();
  });

  test('revoking the approver before their decision is recorded voids it', async () => {
    const { id } = await h.start('probe_grant', { users: 3 });
    await h.run(id);
    await sql(
      h.databaseUrl,
      `INSERT INTO app.principals (tenant, subject, revoked, revoked_at) VALUES ('acme', 'carol', true, now())`,
    );
    const r = await h.decide(id, { approved: true }, { subject: 'carol' });
    expect(r).toMatchObject({ ok: false, code: 'principal_revoked' });
    expect((await h.task(id)).status).toBe('input_required');
  });
});
