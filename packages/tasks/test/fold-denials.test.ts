import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createPool, type Pool } from '@mtg/db';
import { createDenialFold, type DenialEvent } from '../src/fold-denials.ts';
import { pollUntil } from '../../../test/support/poll.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

let db: TestDatabase;
let pool: Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  // The project's pool: a connection the database ends (the drop below forces any still
  // closing) is an error its own handler takes, not an unhandled one.
  pool = createPool({ connectionString: db.url, role: 'mtg_gateway' });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const denial = (subject: string, reason: string, verb = 'cancel'): DenialEvent => ({
  type: 'task.denied',
  taskId: randomBytes(16).toString('hex'),
  tenant: 'acme',
  subject,
  client: 'mcp-agent',
  reason,
  correlationId: 'c-1',
  data: { verb, wire: 'v1' },
});

async function events(subject: string) {
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  try {
    const r = await admin.query(
      `SELECT task_id, reason, body FROM audit.events WHERE subject = $1 ORDER BY seq`,
      [subject],
    );
    return r.rows.map((row) => ({ ...row, data: JSON.parse(row.body).data }));
  } finally {
    await admin.end();
  }
}

test("one caller's repeats of a denial are one event, then one summary with a count when the window closes", async () => {
  const failures: Error[] = [];
  // The windows close when this test closes them: on a loaded machine 300 ms of wall time
  // may pass before the repeats below are all denied.
  const armed: Array<{ close: () => void; ms: number }> = [];
  const fold = createDenialFold({
    pool,
    windowMs: 300,
    onSummaryFailed: (e) => failures.push(e),
    schedule: (close, ms) => {
      const entry = { close, ms };
      armed.push(entry);
      return () => armed.splice(armed.indexOf(entry), 1);
    },
  });
  const first = denial('fold-1', 'unknown_task');
  await fold.deny(first);
  const repeats = Array.from({ length: 12 }, () => denial('fold-1', 'unknown_task'));
  for (const d of repeats) await fold.deny(d);
  // Another reason, another verb, another caller: each a first of its own.
  await fold.deny(denial('fold-1', 'cross_tenant'));
  await fold.deny(denial('fold-1', 'unknown_task', 'get'));
  await fold.deny(denial('fold-2', 'unknown_task'));

  const during = await events('fold-1');
  expect(during.map((e) => [e.reason, e.data.verb])).toEqual([
    ['unknown_task', 'cancel'],
    ['cross_tenant', 'cancel'],
    ['unknown_task', 'get'],
  ]);
  expect(during[0]!.task_id).toBe(first.taskId);

  // One window per first denial, each armed for windowMs; nothing summarized while open.
  expect(armed.map((a) => a.ms)).toEqual([300, 300, 300, 300]);
  expect(await events('fold-1')).toHaveLength(3);
  // The first window closes: its summary is written (asynchronously, from the close).
  armed.shift()!.close();
  const after = await pollUntil(
    () => events('fold-1'),
    (rows) => rows.length >= 4,
    10_000,
    50,
    'the summary event of the closed window',
  );
  expect(after).toHaveLength(4);
  expect(after[3]).toMatchObject({
    task_id: null,
    reason: 'unknown_task',
    data: { verb: 'cancel', wire: 'v1', summary: true, count: 12, windowMs: 300 },
  });
  expect(after[3]!.data.taskIds).toEqual(repeats.slice(0, 10).map((d) => d.taskId));
  expect(failures).toEqual([]);

  // The next window starts afresh.
  await fold.deny(denial('fold-1', 'unknown_task'));
  expect(await events('fold-1')).toHaveLength(5);
});
