// Explicit and derived idempotency keys at the edges: a key past its task's retention, and a
// key a client gave that the gateway cannot use.
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

const KEY = 'io.mcp-task-gateway/idempotency-key';
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    // Retention far shorter than the derived key's dedupe window (10 minutes by default).
    env: { TOOL_LIMITS: JSON.stringify({ generate_report: { retentionMs: 1500 } }) },
  });
});
afterAll(async () => {
  await stack?.close();
});

const tasksOf = async (subject: string) =>
  (
    await sql<{ n: number }>(
      stack.db.url,
      'SELECT count(*)::int AS n FROM app.tasks WHERE subject = $1',
      [subject],
    )
  )[0]!.n;

describe('retention', () => {
  test('a repeat start after the earlier task passed its retention makes a new task, for a derived and an explicit key alike', async () => {
    const token = await stack.token('rita', 'acme');
    const wire = jobToolsWire(stack.mcpUrl);
    const client = await connectV1(stack.mcpUrl, token);
    const explicitStart = async () =>
      (
        (
          await client.callTool({
            name: 'generate_report',
            arguments: { report: 'explicit' },
            _meta: { [KEY]: 'nightly-7' },
          })
        ).structuredContent as { jobId: string }
      ).jobId;
    const derived = await wire.start(token, 'generate_report', { report: 'derived' });
    const explicit = await explicitStart();
    for (const id of [derived, explicit]) {
      const done = await pollUntil(
        () => wire.get(token, id),
        (a) => a.ok && a.value.status === 'completed',
      );
      expect(done).toMatchObject({ ok: true, value: { status: 'completed' } });
    }
    // No worker, no purge: the rows stay in the table past their retention.
    for (const w of stack.workers) await w.stop();
    for (const id of [derived, explicit]) {
      const gone = await pollUntil(
        () => wire.get(token, id),
        (a) => !a.ok,
        10_000,
      );
      expect(gone).toEqual({ ok: false, error: 'Task not found' });
    }
    expect(
      await sql(stack.db.url, 'SELECT id FROM app.tasks WHERE id = ANY($1)', [[derived, explicit]]),
    ).toHaveLength(2);

    const derivedAgain = await wire.start(token, 'generate_report', { report: 'derived' });
    const explicitAgain = await explicitStart();
    expect(derivedAgain).not.toBe(derived);
    expect(explicitAgain).not.toBe(explicit);
    // The new tasks are real: every verb answers for them.
    for (const id of [derivedAgain, explicitAgain])
      expect(await wire.get(token, id)).toMatchObject({ ok: true, value: { status: 'working' } });
    await client.close();
  });
});
