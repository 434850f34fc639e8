// A pool keeps its idle sessions long enough that a pause between bursts of requests does not
// reopen them (create-pool.ts, IDLE_CONNECTION_MS): a new session pays again for its backend,
// its catalog caches and every prepared statement.
import { createPool } from '../src/index.ts';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

test('a session idle for longer than 10 s is still the pool’s', async () => {
  const pool = createPool({ connectionString: url, max: 1 });
  try {
    const pid = async () =>
      (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const before = await pid();
    // node-postgres's own default would have closed it after 10 s.
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    expect(pool.totalCount).toBe(1);
    expect(await pid()).toBe(before);
  } finally {
    await pool.end();
  }
}, 30_000);
