import type { Job } from 'pg-boss';
import { createPool, ROLES } from '@mtg/db';
import { createBoss, installQueue } from '@mtg/tasks';
import { createJobCompletions } from '../src/job-completions.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

// job-completions.ts: the jobs of runs that end while a completion is on its way are
// completed together by the next statement, per queue, each fenced to its attempt; a lone
// job at once. Against the real pg-boss.
const A = 'tool.a.000000000000';
const B = 'tool.b.000000000000';
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await installQueue(db.url, [ROLES.gateway, ROLES.worker], [A, B]);
});
afterAll(async () => {
  await db?.drop();
});

async function withBoss(run: (boss: ReturnType<typeof createBoss>) => Promise<void>) {
  const pool = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  try {
    await run(boss);
  } finally {
    await boss.stop({ graceful: false, close: false });
    await pool.end();
  }
}

async function fetched(boss: ReturnType<typeof createBoss>, queue: string, n: number) {
  for (let i = 0; i < n; i++) await boss.send(queue, { taskId: `${queue}-${i}` });
  const jobs = await boss.fetch(queue, { batchSize: n });
  expect(jobs).toHaveLength(n);
  return jobs;
}

test('jobs ending during a completion are completed together, one statement per queue', async () => {
  await withBoss(async (boss) => {
    const calls: Array<[string, number]> = [];
    const counting = {
      complete: ((name: string, jobs: Job<unknown>[]) => {
        calls.push([name, jobs.length]);
        return boss.complete(name, jobs);
      }) as typeof boss.complete,
    };
    const complete = createJobCompletions(counting);
    const a = await fetched(boss, A, 5);
    const b = await fetched(boss, B, 3);
    // The first goes at once; the rest queue behind it and go in one statement per queue.
    await Promise.all([...a, ...b].map((job) => complete(job)));
    expect(calls).toEqual([
      [A, 1],
      [A, 4],
      [B, 3],
    ]);
    for (const job of [...a, ...b]) {
      expect((await boss.getJobById(job.name, job.id))?.state).toBe('completed');
    }
  });
});

test("a failed completion rejects its own batch's callers only", async () => {
  await withBoss(async (boss) => {
    const complete = createJobCompletions(boss);
    const [a] = await fetched(boss, A, 1);
    const unknownQueue = { ...a!, name: 'tool.none.000000000000' };
    const results = await Promise.allSettled([complete(a!), complete(unknownQueue)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect((await boss.getJobById(A, a!.id))?.state).toBe('completed');
  });
});
