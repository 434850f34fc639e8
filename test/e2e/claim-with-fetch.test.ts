import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// A worker woken for a task fetches its job and claims the task in one statement
// (claimNextJob): one transaction, so the job's start and the task's are the same instant.
let stack: Stack;
let token: string;
const wire = () => jobToolsWire(stack.mcpUrl);

beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '20' } });
  token = await stack.token('claire', 'acme');
});
afterAll(async () => {
  await stack?.close();
});

test('a task announced to an idle worker is fetched and claimed by one statement, and runs once', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const id = await wire().start(token, 'bulk_update_records', {
      collection: `claimed-${i}`,
      count: 10,
      patch: { a: 1 },
    });
    await pollUntil(
      async () => ((await wire().get(token, id)) as { value?: { status?: string } }).value?.status,
      (s) => s === 'completed',
      20_000,
      25,
    );
    ids.push(id);
  }
  const rows = await sql(
    stack.db.url,
    `SELECT t.id, j.state, j.started_on = t.started_at AS one_statement,
            (SELECT count(*)::int FROM audit.events e
              WHERE e.task_id = t.id AND e.type IN ('task.started', 'task.lease_taken')) AS claims
       FROM app.tasks t JOIN pgboss.job j ON j.id = t.job_id
      WHERE t.id = ANY($1) ORDER BY t.created_at`,
    [ids],
  );
  expect(rows).toEqual(
    ids.map((id) => ({ id, state: 'completed', one_statement: true, claims: 1 })),
  );
});

describe('a worker full when its tasks were announced', () => {
  let full: Stack;
  beforeAll(async () => {
    // One slot: while a task runs, the ones started after it are announced to a full worker.
    full = await startStack({ workers: 1, env: { DEMO_STEP_MS: '300', WORKER_CONCURRENCY: '1' } });
  });
  afterAll(async () => {
    await full?.close();
  });

  test('claims each of them when a run ends, each in one statement, as if announced then', async () => {
    const t = await full.token('fiona', 'acme');
    const w = jobToolsWire(full.mcpUrl);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(
        await w.start(t, 'bulk_update_records', {
          collection: `full-${i}`,
          count: 10,
          patch: { a: 1 },
        }),
      );
    }
    for (const id of ids) {
      await pollUntil(
        async () => ((await w.get(t, id)) as { value?: { status?: string } }).value?.status,
        (s) => s === 'completed',
        20_000,
        50,
      );
    }
    const rows = await sql(
      full.db.url,
      `SELECT t.id, j.started_on = t.started_at AS one_statement
         FROM app.tasks t JOIN pgboss.job j ON j.id = t.job_id
        WHERE t.id = ANY($1) ORDER BY t.created_at`,
      [ids],
    );
    expect(rows).toEqual(ids.map((id) => ({ id, one_statement: true })));
  });
});
