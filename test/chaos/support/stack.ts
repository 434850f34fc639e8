import { preparedDatabase } from '../../../scripts/bench/lib/database.ts';
import {
  startProcessStack,
  type ProcessStack,
  type ProcessStackOptions,
} from '../../../scripts/bench/lib/process-stack.ts';
import type { TestDatabase } from '../../support/database.ts';

/**
 * The product as real processes over a fresh database for the enclosing describe block:
 * started before its tests, stopped and dropped after them. Read `stack` and `db` inside
 * tests (they exist from beforeAll on).
 */
export function chaosStack(options: Omit<ProcessStackOptions, 'databaseUrl' | 'databaseUrls'>): {
  readonly stack: ProcessStack;
  readonly db: TestDatabase;
} {
  const ctx = {} as { stack: ProcessStack; db: TestDatabase };
  beforeAll(async () => {
    ctx.db = await preparedDatabase();
    ctx.stack = await startProcessStack({
      databaseUrl: ctx.db.url,
      databaseUrls: ctx.db.logins,
      ...options,
    });
  }, 120_000);
  afterAll(async () => {
    await ctx.stack?.stop();
    await ctx.db?.drop();
  }, 60_000);
  return ctx;
}
