import { nowMs } from '@mtg/clock';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createPool, migrate, MIGRATIONS_DIR, recreateDatabase, ROLES } from '@mtg/db';
import { createLogger } from '@mtg/log';
import {
  runTask,
  StopRun,
  stopReasonOf,
  type RunResult,
  type ServedTool,
  type TaskTargets,
} from '@mtg/runner';
import {
  CHANNELS,
  createBoss,
  createJobQueue,
  createTaskEvents,
  createTaskService,
  installQueue,
  type TaskService,
  type TaskView,
} from '@mtg/tasks';
import {
  createDownstreamResilience,
  createRegistry,
  createTargetClient,
  serveInstantTool,
  type ToolRegistry,
  type ToolResult,
} from '@mtg/tools';
import type { AskAnswer, LongTool, Pack, TaskContext, ToolCaller } from '@mtg/tool-kit';
import type { RecordingTarget } from './recording-target.ts';
import { scratchServer } from './scratch-postgres.ts';

/** A real HTTP target for the harness: its URL, and the bearer token to send it. */
export interface HttpTarget {
  url: string;
  token?: () => Promise<string>;
}

export interface HarnessOptions {
  pack: Pack;
  /** The pack's configuration source (default: process.env). */
  env?: Record<string, string | undefined>;
  /** Each target the pack declares: a recording fake (recordingTarget) or a real URL. */
  targets?: Record<string, RecordingTarget | HttpTarget>;
  /**
   * A PostgreSQL URL with the right to create databases (the harness makes a scratch one,
   * migrates it and drops it on close). Default: TOOL_HARNESS_DATABASE_URL, DATABASE_URL or
   * the test suite's TEST_ADMIN_DATABASE_URL; with none of them, an embedded PostgreSQL that
   * the harness starts in a temporary directory and removes when the last harness closes.
   */
  databaseUrl?: string;
  /** Whom tasks run for (default alice of tenant acme, with every scope of the pack). */
  owner?: Partial<ToolCaller>;
  /** The lease a run holds (default 2 s). */
  leaseMs?: number;
}

/** What `run` did: the runner's result, or `crashed` for a simulated crash. */
export type HarnessRunResult = RunResult | 'crashed';

export interface HarnessTaskState extends TaskView {
  /** The stored result of a completed task. */
  result?: ToolResult;
  /** The journal: finished steps, in order. */
  steps: string[];
}

export interface ToolHarness {
  registry: ToolRegistry;
  /** The scratch database (migrated, dropped on close), for a test's own queries. */
  databaseUrl: string;
  /** Starts a long tool as the gateway would (validated arguments, idempotency, limits). */
  start(
    tool: string,
    args: unknown,
    options?: { deadlineMs?: number; idempotencyKey?: string },
  ): Promise<{ id: string; created: boolean }>;
  /**
   * Runs (or resumes) a task with the real runner, as a worker would. `crashAfterSteps: n`
   * simulates the worker dying once n steps have been journaled in this run: the attempt dies
   * at the tool's next `ctx.step`, `ctx.ask` or `ctx.approval` call (work the tool does
   * between steps has happened, as it would before a real crash; `crashAfterSteps: 0` after
   * an answer is a worker that dies as it resumes with the answer), the runner gives the lease back as for any failed attempt, and
   * the next `run` resumes from the journal under a new lease epoch.
   */
  run(taskId: string, options?: { crashAfterSteps?: number }): Promise<HarnessRunResult>;
  /**
   * Answers the question a task is parked on (`ctx.ask`) as its owner would from any wire:
   * validated against the question's form (a refusal says why; the task keeps waiting),
   * journaled, and the task is working again; `run` it to go on. `task(id).input` shows the
   * question that waits.
   */
  answer(
    taskId: string,
    response: AskAnswer | Record<string, unknown>,
  ): Promise<{ ok: true; task: TaskView } | { ok: false; code: string; message: string }>;
  /**
   * Approves or rejects a task waiting on `ctx.approval`, as `approver` (a principal of the
   * owner's tenant; default bob, with every scope of the pack), exactly as approve_task /
   * reject_task do: the owner deciding their own task is refused.
   */
  decide(
    taskId: string,
    decision: { approved: boolean; reason?: string },
    approver?: Partial<ToolCaller>,
  ): Promise<{ ok: true } | { ok: false; code: string; message: string }>;
  /** Cancels as the owner does; a run in flight stops at once and this resolves when it has. */
  cancel(taskId: string): Promise<TaskView>;
  /** The task as its owner sees it, with its result and journal. */
  task(taskId: string): Promise<HarnessTaskState>;
  /** How often each step's function actually ran (journaled steps do not run again). */
  stepRuns(taskId: string): Record<string, number>;
  /** Calls an instant tool as `caller` (default: the owner). */
  call(tool: string, args: unknown, caller?: Partial<ToolCaller>): Promise<ToolResult>;
  close(): Promise<void>;
}

class SimulatedCrash extends Error {
  constructor() {
    super('simulated worker crash');
    this.name = 'SimulatedCrash';
  }
}

/**
 * Runs a pack's tools in-process against a real PostgreSQL with the real task service and
 * runner: steps and journal, progress, cancellation, simulated crashes and resumes, deadlines,
 * results. What it leaves out, by design: HTTP, OAuth and the queue's delivery (the harness
 * calls the runner itself instead of a worker fetching the job).
 */
export async function createToolHarness(options: HarnessOptions): Promise<ToolHarness> {
  const env = options.env ?? process.env;
  const config = options.pack.config ? options.pack.config.parse(env) : {};
  const registry = createRegistry([{ pack: options.pack, config }]);
  for (const t of options.pack.targets) {
    if (!options.targets?.[t]) {
      throw new TypeError(
        `the harness needs a target for ${t} (recordingTarget('${t}') or { url })`,
      );
    }
  }

  const admin =
    options.databaseUrl ??
    process.env.TOOL_HARNESS_DATABASE_URL ??
    process.env.DATABASE_URL ??
    process.env.TEST_ADMIN_DATABASE_URL;
  const server = await scratchServer(admin);
  const name = `mtg_harness_${randomBytes(6).toString('hex')}`;
  const url = await recreateDatabase(server.url, name);
  await migrate(url, MIGRATIONS_DIR);
  await installQueue(url, [ROLES.gateway, ROLES.worker], registry.queues().values());

  const logger = createLogger('tool-harness', { silent: !process.env.TEST_LOGS });
  const gatewayPool = createPool({ connectionString: url, role: ROLES.gateway, max: 5 });
  const workerPool = createPool({ connectionString: url, role: ROLES.worker, max: 10 });
  const boss = createBoss(gatewayPool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  const events = await createTaskEvents(url, [CHANNELS.control, CHANNELS.settled]);
  const service: TaskService = createTaskService({
    pool: gatewayPool,
    queue: createJobQueue(boss),
    events,
    tools: registry.long,
    placement: (name) => registry.placement(name),
    limits: {
      maxActivePerUser: 1000,
      maxActivePerTenant: 1000,
      derivedDedupeWindowMs: 60_000,
      pollIntervalMs: 100,
    },
    statusReadAudit: 'all',
    cancelAckTimeoutMs: 5000,
    logger,
  });

  const owner: ToolCaller = {
    issuer: 'tool-harness',
    tenant: 'acme',
    subject: 'alice',
    client: 'tool-harness',
    scopes: registry.scopes(),
    ...options.owner,
  };
  const principal = { ...owner, expiresAt: Math.floor(nowMs() / 1000) + 86_400 };
  const verb = () => ({
    principal,
    correlationId: `harness-${randomBytes(4).toString('hex')}`,
    wire: 'harness',
  });

  const stepRuns = new Map<string, Record<string, number>>();
  const runCount = new Map<string, number>();
  const stops = new Map<string, AbortController>();
  events.on(CHANNELS.control, (payload) => {
    const stop = stops.get(String(payload.taskId));
    if (!stop) return;
    stop.abort(new StopRun(stopReasonOf(payload)));
  });

  const resilience = createDownstreamResilience({
    attemptTimeoutMs: 10_000,
    retries: 0,
    backoffInitialMs: 50,
    backoffMaxMs: 200,
    breakerThreshold: 1000,
    breakerCooldownMs: 1000,
  });
  const targetsFor = (taskId: string): TaskTargets => ({
    client(targetName, hooks) {
      const t = options.targets![targetName]!;
      if ('clientFor' in t) {
        return t.clientFor(taskId, () => runCount.get(taskId) ?? 1, hooks.beforeCall);
      }
      return createTargetClient({
        name: targetName,
        baseUrl: t.url,
        taskId,
        token: t.token ?? (async () => 'tool-harness'),
        signal: hooks.signal,
        beforeCall: hooks.beforeCall,
        resilience,
      });
    },
    beginStage() {},
  });

  /** The tool as this run sees it: steps counted, and the crash, if one is asked for. */
  const instrumented = (
    tool: LongTool,
    taskId: string,
    crashAfter: number | undefined,
    crashed: { value: boolean },
  ): LongTool => {
    const runs = stepRuns.get(taskId) ?? {};
    stepRuns.set(taskId, runs);
    let journaled = 0;
    const crashHere = () => {
      if (crashAfter !== undefined && journaled >= crashAfter) {
        crashed.value = true;
        throw new SimulatedCrash();
      }
    };
    return {
      ...tool,
      execute: (ctx: TaskContext, args: unknown) =>
        tool.execute(
          {
            ...ctx,
            // A worker may die right after it got an answer, before it used it.
            ask: async (question) => {
              crashHere();
              return ctx.ask(question);
            },
            approval: async (request) => {
              crashHere();
              return ctx.approval(request);
            },
            step: async (stepName, fn) => {
              crashHere();
              const out = await ctx.step(stepName, (signal) => {
                runs[stepName] = (runs[stepName] ?? 0) + 1;
                return fn(signal);
              });
              journaled++;
              return out;
            },
          },
          args,
        ),
    };
  };

  return {
    registry,
    databaseUrl: url,
    async start(tool, args, o = {}) {
      const long = registry.long.get(tool);
      if (!long) throw new TypeError(`${tool} is not a long tool of pack ${options.pack.name}`);
      const outcome = await service.start({
        principal,
        tool: long,
        args: long.inputSchema.parse(args),
        correlationId: verb().correlationId,
        wire: 'harness',
        ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}),
        ...(o.idempotencyKey !== undefined ? { idempotencyKey: o.idempotencyKey } : {}),
      });
      if (!outcome.ok) throw new Error(`start refused: ${outcome.code}: ${outcome.message}`);
      return { id: outcome.task.id, created: outcome.created };
    },
    async run(taskId, o = {}) {
      const row = await workerPool.query<{ tool: string }>(
        'SELECT tool FROM app.tasks WHERE id = $1',
        [taskId],
      );
      const toolName = row.rows[0]?.tool;
      if (!toolName) return 'gone';
      const entry = registry.entry(toolName)!;
      runCount.set(taskId, (runCount.get(taskId) ?? 0) + 1);
      const crashed = { value: false };
      const served: ServedTool = {
        tool: instrumented(entry.tool as LongTool, taskId, o.crashAfterSteps, crashed),
        fingerprint: entry.fingerprint,
      };
      const stop = new AbortController();
      stops.set(taskId, stop);
      try {
        const result = await runTask(
          {
            pool: workerPool,
            tools: new Map([[toolName, served]]),
            workerId: `harness-run-${runCount.get(taskId)}`,
            leaseMs: options.leaseMs ?? 2000,
            maxAttempts: 10,
            logger,
            targetsFor: (task) => targetsFor(task.id),
          },
          taskId,
          stop.signal,
        );
        return crashed.value && result === 'retry' ? 'crashed' : result;
      } finally {
        stops.delete(taskId);
      }
    },
    async answer(taskId, response) {
      const outcome = await service.answer(taskId, verb(), { response });
      return outcome.ok
        ? { ok: true, task: outcome.task }
        : { ok: false, code: outcome.code, message: outcome.message };
    },
    async decide(taskId, decision, approver) {
      const p = { ...principal, subject: 'bob', client: 'tool-harness', ...approver };
      const outcome = await service.decide(taskId, { ...verb(), principal: p }, decision);
      return outcome.ok
        ? { ok: true }
        : { ok: false, code: outcome.code, message: outcome.message };
    },
    async cancel(taskId) {
      const outcome = await service.cancel(taskId, verb());
      if (!outcome.ok) throw new Error(`cancel refused: ${outcome.code}: ${outcome.message}`);
      return outcome.task;
    },
    async task(taskId) {
      const got = await service.get(taskId, verb());
      if (!got.ok) throw new Error(`no such task: ${got.message}`);
      const steps = await workerPool.query<{ name: string }>(
        'SELECT step AS name FROM app.task_steps WHERE task_id = $1 ORDER BY seq',
        [taskId],
      );
      const stored = await gatewayPool.query<{ result: ToolResult }>(
        'SELECT result FROM app.task_results WHERE task_id = $1',
        [taskId],
      );
      return {
        ...got.task,
        steps: steps.rows.map((r) => r.name),
        ...(stored.rows[0] ? { result: stored.rows[0].result } : {}),
      };
    },
    stepRuns: (taskId) => ({ ...stepRuns.get(taskId) }),
    async call(tool, args, caller) {
      const instant = registry.instant.find((t) => t.name === tool);
      if (!instant)
        throw new TypeError(`${tool} is not an instant tool of pack ${options.pack.name}`);
      const served = serveInstantTool(instant, logger);
      const parsed = instant.inputSchema.safeParse(args);
      if (!parsed.success) {
        return {
          isError: true,
          content: [{ type: 'text', text: `Invalid arguments: ${parsed.error.message}` }],
        };
      }
      return served.run(
        { principal: { ...principal, ...caller }, correlationId: verb().correlationId },
        parsed.data,
      );
    },
    async close() {
      for (const stop of stops.values()) stop.abort(new StopRun('shutdown'));
      await events.close();
      await boss.stop({ graceful: false, close: false }).catch(() => {});
      await gatewayPool.end();
      await workerPool.end();
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      } finally {
        await client.end();
        await server.release();
      }
    },
  };
}
