// One caller must not be able to write much more to the undeletable audit chain than it
// sends, nor many events by repeating a refused request: summaries are bounded, cancels and
// lists are rate limited like polls, and repeated identical denials fold into one event.
import { CancelTaskResultSchema, ListTasksResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { RATE_LIMIT_POLLS_PER_SECOND: '2' } });
});
afterAll(async () => {
  await stack?.close();
});

const randomId = () =>
  Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');

async function denials(subject: string) {
  return (
    await sql(
      stack.db.url,
      `SELECT reason, body FROM audit.events WHERE type = 'task.denied' AND subject = $1 ORDER BY seq`,
      [subject],
    )
  ).map((r) => ({ reason: r.reason as string, data: JSON.parse(r.body).data }));
}

test('a start with 50 patch fields of 19 KB each writes a bounded summary to the audit chain and the listing', async () => {
  const token = await stack.token('amp-big', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const patch = Object.fromEntries(
    Array.from({ length: 50 }, (_, i) => [`${i}-${'k'.repeat(19_000)}`, 1]),
  );
  const started = await client.callTool({
    name: 'bulk_update_records',
    arguments: { collection: 'big', count: 1, patch },
  });
  expect(started.isError).toBeFalsy();
  const jobId = (started.structuredContent as { jobId: string }).jobId;

  const [created] = await sql(
    stack.db.url,
    `SELECT length(body) AS bytes, body FROM audit.events WHERE type = 'task.created' AND task_id = $1`,
    [jobId],
  );
  expect(created.bytes).toBeLessThan(6000);
  const summary = JSON.parse(created.body).data.arguments;
  expect(Buffer.byteLength(JSON.stringify(summary))).toBeLessThanOrEqual(4096);
  expect(summary).toMatchObject({ collection: 'big', count: 1 });
  // The field names (string values here) cut to 256 characters, marked; the rest counted.
  expect(summary.patchFields[0]).toBe(`0-${'k'.repeat(253)}…`);
  expect(summary.patchFields.at(-1)).toMatch(/^… \d+ more$/);

  const listed = await client.callTool({ name: 'list_jobs', arguments: {} });
  const job = (listed.structuredContent as { jobs: Array<Record<string, any>> }).jobs.find(
    (j) => j.jobId === jobId,
  );
  expect(job?.arguments).toEqual(summary);
  await client.close();
});

test('30 rapid tasks/cancel on random ids are rate limited like polls, and audited as one denial per reason', async () => {
  const token = await stack.token('amp-cancel', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const answers: Array<{ code?: number; data?: Record<string, unknown> }> = [];
  for (let i = 0; i < 30; i++) {
    answers.push(
      await client
        .request({ method: 'tasks/cancel', params: { taskId: randomId() } }, CancelTaskResultSchema)
        .then(
          () => ({}),
          (e: { code: number; data?: Record<string, unknown> }) => e,
        ),
    );
  }
  await client.close();
  const limited = answers.filter((a) => a.data?.reason === 'rate_limited');
  const notFound = answers.filter((a) => a.code === -32602 || a.data?.reason === 'task_not_found');
  expect(limited.length).toBeGreaterThan(0);
  expect(notFound.length).toBeGreaterThan(0);
  expect(limited.length + notFound.length).toBe(30);

  const audited = await denials('amp-cancel');
  const unknown = audited.filter((d) => d.reason === 'unknown_task');
  // The first unknown id is written; the repeats wait for the window's summary.
  expect(unknown).toHaveLength(1);
  expect(unknown[0]!.data).toMatchObject({ verb: 'cancel' });
  const rateLimited = audited.filter((d) => d.reason === 'rate_limited');
  expect(rateLimited.length).toBeGreaterThan(0);
  expect(rateLimited.length).toBeLessThan(limited.length);
  expect(rateLimited[0]!.data).toMatchObject({ verb: 'cancel', limit: 'controls' });
});

test('tasks/list and list_jobs are rate limited per caller too', async () => {
  const token = await stack.token('amp-list', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const core = await Promise.all(
    Array.from({ length: 8 }, () =>
      client.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema).then(
        () => 'ok',
        (e: { data?: { reason?: string } }) => e.data?.reason,
      ),
    ),
  );
  expect(core).toContain('rate_limited');
  const jobs = await Promise.all(
    Array.from({ length: 8 }, () => client.callTool({ name: 'list_jobs', arguments: {} })),
  );
  const refused = jobs.filter((r) => r.isError);
  expect(refused.length).toBeGreaterThan(0);
  expect(refused[0]!.structuredContent).toMatchObject({ error: 'rate_limited' });
  await client.close();
});
