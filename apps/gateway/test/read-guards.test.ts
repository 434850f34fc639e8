// The task service's `read` (status with result, one verb) passes every guard the gateway
// puts around the service; spreading `...tasks` in a guard would let it skip one silently.
import type { Pool } from '@mtg/db';
import { createLogger } from '@mtg/log';
import type { Policy } from '@mtg/policy';
import type { TaskService, VerbContext } from '@mtg/tasks';
import type { RateLimits } from '../src/http/rate-limit.ts';
import {
  withDatabaseOutage,
  withDenialCounts,
  withRateLimits,
  withToolPolicy,
} from '../src/mcp/task-service-guards.ts';

const ctx = {
  principal: { tenant: 't', subject: 's', client: 'c', scopes: [] },
  correlationId: 'corr',
  wire: 'test',
  workload: { client: 'c' },
} as unknown as VerbContext;

/** A service whose `read` is answered by `answer`; every other verb is a bug here. */
function serviceReading(answer: (c: VerbContext) => Promise<unknown>): TaskService {
  return new Proxy({} as TaskService, {
    get: (_t, verb) =>
      verb === 'read'
        ? (_id: string, c: VerbContext) => answer(c)
        : () => {
            throw new Error(`unexpected verb ${String(verb)}`);
          },
  });
}

test('read costs one poll point and is refused when the caller is over the poll limit', async () => {
  let polls = 0;
  const limits = {
    poll: async () => {
      polls++;
      return { ok: false, limit: 'polls', retryAfterSeconds: 1, firstInWindow: false };
    },
    noteDenied: () => {},
  } as unknown as RateLimits;
  const guarded = withRateLimits(
    serviceReading(async () => {
      throw new Error('the limit should have refused first');
    }),
    limits,
    {} as Pool,
  );
  const r = await guarded.read('a'.repeat(32), ctx, { withResult: true });
  expect(r).toMatchObject({ ok: false, code: 'rate_limited' });
  expect(polls).toBe(1);
});

test('read gets the tool policy in its context', async () => {
  let seen: VerbContext | undefined;
  const policy = { decide: () => ({ allowed: false }) } as unknown as Policy;
  const guarded = withToolPolicy(
    serviceReading(async (c) => {
      seen = c;
      return { ok: false, code: 'task_not_found', message: 'Task not found' };
    }),
    policy,
  );
  await guarded.read('a'.repeat(32), ctx, { withResult: true });
  expect(seen?.admitTool?.('generate_report')).toBe(false);
});

test('read answers a database outage as unavailable, and its denials are counted', async () => {
  const outage = withDatabaseOutage(
    serviceReading(async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    }),
    createLogger('test', { silent: true }),
  );
  expect(await outage.read('a'.repeat(32), ctx, { withResult: true })).toMatchObject({
    ok: false,
    code: 'unavailable',
  });
  const counts: string[] = [];
  const counted = withDenialCounts(
    serviceReading(async () => ({ ok: true, task: {}, row: {}, result: 'gone' })),
    (reason) => counts.push(reason),
  );
  await counted.read('a'.repeat(32), ctx, { withResult: true });
  expect(counts).toEqual(['result_gone']);
});

test('a PostgreSQL error other than an outage reaches the wire without its driver text', async () => {
  const logged: unknown[] = [];
  const logger = {
    ...createLogger('test', { silent: true }),
    error: (...a: unknown[]) => logged.push(a),
  };
  const guarded = withDatabaseOutage(
    serviceReading(async () => {
      throw Object.assign(new Error('invalid input syntax for type bigint: "0.5"'), {
        code: '22P02',
        severity: 'ERROR',
      });
    }),
    logger as never,
  );
  const thrown = await guarded
    .read('a'.repeat(32), ctx, { withResult: true })
    .catch((e: Error) => e);
  expect(thrown).toBeInstanceOf(Error);
  expect((thrown as Error).message).toBe('Internal error');
  expect(JSON.stringify(logged)).toMatch(/invalid input syntax/);
});
