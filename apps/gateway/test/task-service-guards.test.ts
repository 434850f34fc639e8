// Every verb of the task service passes every guard the gateway declares: the list is applied
// by construction (guardTaskService), so a verb added to TaskService cannot skip one the way
// spreading `...tasks` in a guard let it.
import type { Pool } from '@mtg/db';
import { createLogger } from '@mtg/log';
import type { Policy } from '@mtg/policy';
import {
  createTaskService,
  type TaskService,
  type TaskServiceDeps,
  type VerbContext,
} from '@mtg/tasks';
import type { RateLimits } from '../src/http/rate-limit.ts';
import {
  guardTaskService,
  taskServiceGuards,
  TASK_VERBS,
  type TaskGuard,
  type TaskVerb,
} from '../src/mcp/task-service-guards.ts';
import { createToolPolicy } from '../src/mcp/tool-policy.ts';

const TASK = 'a'.repeat(32);
const principal = { tenant: 't', subject: 's', client: 'c', scopes: ['reports:run'] };
const ctx = {
  principal,
  correlationId: 'corr',
  wire: 'test',
  workload: { kind: 'oauth-client', id: 'c' },
} as unknown as VerbContext;
const startInput = { ...ctx, tool: { name: 'generate_report' }, args: {} };

/** How each verb is called here: a Record over every verb, so a new verb must be added. */
const CALLS: Record<TaskVerb, unknown[]> = {
  start: [startInput],
  get: [TASK, ctx],
  read: [TASK, ctx, { withResult: true }],
  result: [TASK, ctx],
  awaitResult: [TASK, ctx, 10],
  cancel: [TASK, ctx, {}],
  answer: [TASK, ctx, { response: { action: 'decline' } }],
  approvals: [ctx],
  decide: [TASK, ctx, { approved: true }],
  list: [ctx, {}],
};
const call = (service: TaskService, verb: TaskVerb) =>
  (service[verb] as (...a: unknown[]) => Promise<{ ok: boolean; code?: string }>)(...CALLS[verb]);

/** A service whose every verb answers `answer(verb, args)`, recording what it was called with. */
function fakeService(answer: (verb: TaskVerb, args: unknown[]) => Promise<unknown>) {
  const calls: Array<{ verb: TaskVerb; args: unknown[] }> = [];
  const service = { toolScope: () => 'reports:run' } as Record<string, unknown>;
  for (const verb of TASK_VERBS)
    service[verb] = (...args: unknown[]) => {
      calls.push({ verb, args });
      return answer(verb, args);
    };
  return { service: service as unknown as TaskService, calls };
}

// A pool that accepts an audit append (a refusal's first-in-window event) and nothing else.
const auditPool = {
  totalCount: 0,
  query: async () => ({ rows: [{ seq: '1', seqs: ['1'] }], rowCount: 1 }),
} as unknown as Pool;
const refusingLimits = {
  start: async () => ({ ok: false, limit: 'starts', retryAfterSeconds: 1, firstInWindow: false }),
  poll: async () => ({ ok: false, limit: 'polls', retryAfterSeconds: 1, firstInWindow: false }),
  control: async () => ({
    ok: false,
    limit: 'controls',
    retryAfterSeconds: 1,
    firstInWindow: false,
  }),
  noteDenied: () => {},
} as unknown as RateLimits;
const passingLimits = {
  start: async () => ({ ok: true }),
  poll: async () => ({ ok: true }),
  control: async () => ({ ok: true }),
  noteDenied: () => {},
} as unknown as RateLimits;
const denyingPolicy = { decide: () => ({ allowed: false }) } as unknown as Policy;

/** The gateway's list (build-gateway.ts), with the given limits and counter. */
const theList = (
  o: { limits?: RateLimits; count?: (reason: string) => void; maxWaits?: number } = {},
) =>
  taskServiceGuards({
    pool: auditPool,
    logger: createLogger('test', { silent: true }),
    rateLimits: o.limits ?? passingLimits,
    countDenial: o.count ?? (() => {}),
    maxResultWaitsPerCaller: o.maxWaits ?? 1,
    toolPolicy: createToolPolicy(denyingPolicy, auditPool),
  });

test('the guards know every verb the task service has, and the guarded service has no other', () => {
  // Constructing the service does no I/O: its verbs can be listed without a database.
  const service = createTaskService({
    pool: {} as Pool,
    tools: new Map(),
    logger: createLogger('test', { silent: true }),
  } as unknown as TaskServiceDeps);
  const verbs = Object.keys(service).filter((k) => k !== 'toolScope');
  expect(verbs.sort()).toEqual([...TASK_VERBS].sort());
  const guarded = guardTaskService(service, theList());
  expect(Object.keys(guarded).sort()).toEqual(Object.keys(service).sort());
});

test('every verb passes through every guard of the list, in the declared order', async () => {
  const seen: string[] = [];
  const recorded = theList().map((g): TaskGuard => ({
    name: g.name,
    around: (c, next) => {
      seen.push(`${c.verb}: ${g.name}`);
      return g.around(c, next);
    },
  }));
  const names = recorded.map((g) => g.name);
  expect(names).toEqual([
    'tool policy',
    'denial counts',
    'database outage',
    'rate limits',
    'result wait cap',
  ]);
  const { service } = fakeService(async () => ({ ok: true, task: {}, row: {}, tasks: [] }));
  const guarded = guardTaskService(service, recorded);
  for (const verb of TASK_VERBS) {
    seen.length = 0;
    await call(guarded, verb);
    expect(seen).toEqual(names.map((n) => `${verb}: ${n}`));
  }
});

test('the rate limits refuse every verb before it reaches the service', async () => {
  const { service, calls } = fakeService(async () => {
    throw new Error('the limit should have refused first');
  });
  const guarded = guardTaskService(service, theList({ limits: refusingLimits }));
  for (const verb of TASK_VERBS)
    expect({ verb, outcome: await call(guarded, verb) }).toMatchObject({
      verb,
      outcome: { ok: false, code: 'rate_limited' },
    });
  expect(calls).toEqual([]);
});

test('a database outage is answered as unavailable by every verb', async () => {
  const { service } = fakeService(async () => {
    throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  });
  const guarded = guardTaskService(service, theList());
  for (const verb of TASK_VERBS)
    expect({ verb, outcome: await call(guarded, verb) }).toMatchObject({
      verb,
      outcome: { ok: false, code: 'unavailable' },
    });
});

test('a denial of every verb is counted', async () => {
  const counted: string[] = [];
  const { service } = fakeService(async () => ({
    ok: false,
    code: 'task_not_found',
    message: 'Task not found',
  }));
  const guarded = guardTaskService(service, theList({ count: (r) => counted.push(r) }));
  for (const verb of TASK_VERBS) {
    counted.length = 0;
    await call(guarded, verb);
    expect({ verb, counted }).toEqual({ verb, counted: ['task_not_found'] });
  }
});

test('every verb on one task gets the tool policy in its context; start and list are declared exempt', async () => {
  const { service, calls } = fakeService(async () => ({ ok: true, task: {}, row: {}, tasks: [] }));
  const guarded = guardTaskService(service, theList());
  for (const verb of TASK_VERBS) await call(guarded, verb);
  const gated = Object.fromEntries(
    calls.map(({ verb, args }) => {
      const c = (
        verb === 'start' || verb === 'list' || verb === 'approvals' ? args[0] : args[1]
      ) as VerbContext;
      return [verb, c.admitTool?.('generate_report') ?? 'exempt'];
    }),
  );
  expect(gated).toEqual({
    start: 'exempt', // admitted by dispatch before its arguments are parsed (tool-policy.ts)
    get: false,
    read: false,
    result: false,
    awaitResult: false,
    cancel: false,
    answer: false,
    approvals: 'exempt', // the approver's own list, filtered by their scopes
    decide: false,
    list: 'exempt', // the caller's own tasks' metadata only
  });
});

test('past its cap a blocking result read does not wait: it reads once, unblocked', async () => {
  const { service, calls } = fakeService(async (verb) =>
    verb === 'result'
      ? { ok: false, code: 'result_not_ready', message: 'not ready' }
      : { ok: true, task: {}, row: {}, tasks: [] },
  );
  const guarded = guardTaskService(service, theList({ maxWaits: 0 }));
  expect(await call(guarded, 'awaitResult')).toMatchObject({
    ok: false,
    code: 'result_wait_limit',
  });
  expect(calls.map((c) => c.verb)).toEqual(['result']);
});
