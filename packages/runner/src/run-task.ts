import type { Clock } from '@mtg/clock';
import type { Pool } from 'pg';
import type { Logger } from '@mtg/log';
import {
  claimTask,
  type ClaimOutcome,
  type JobCompletion,
  type OnTaskEnded,
  type TaskRow,
} from '@mtg/tasks';
import { isToolError, type TargetClient, type UpstreamTaskClient } from '@mtg/tool-kit';
import { toolErrorResult, type LongToolDefinition } from '@mtg/tools';
import { leaveUnservable, servedFingerprints } from './check-servable.ts';
import type { DeferredStep } from './deferred-steps.ts';
import { openRunBoundary, type RunBoundary } from './run-boundary.ts';
import { StopRun } from './stop.ts';
import { fail, finish, release, stopped, type Held } from './settle-run.ts';
import { createTaskContext } from './task-context.ts';
import { createDelegationReads, DelegationEnded, type ReadDelegation } from './task-credentials.ts';
import { executeThroughOutages } from './wait-out-outages.ts';

/** The targets of one run: a client per target name, and stage boundaries for their tokens. */
export interface TaskTargets {
  client(
    name: string,
    hooks: { signal: AbortSignal; beforeCall: () => Promise<void> },
  ): TargetClient;
  /** A new stage begins: each target's next call gets a fresh credential. */
  beginStage(): void;
  /**
   * Right after beginStage: starts now the exchanges this stage's calls are expected to
   * need, so the tool's work before its first call hides them; settles when they are done
   * (never rejects). Undefined: nothing to start.
   */
  prefetch?(): Promise<void> | undefined;
}

/** The upstreams of one run: a client per upstream name, and stage boundaries for tokens. */
export interface TaskUpstreams {
  client(
    name: string,
    hooks: { signal: AbortSignal; beforeCall: () => Promise<void> },
  ): UpstreamTaskClient;
  beginStage(): void;
}

/** What this worker can run: a tool it serves, at the schema fingerprint it serves. */
export interface ServedTool {
  tool: LongToolDefinition;
  fingerprint: string;
}

export interface RunDeps {
  pool: Pool;
  /** The tools this worker serves (WORKER_TOOLS), by name. */
  tools: ReadonlyMap<string, ServedTool>;
  workerId: string;
  /** Lease length; renewed at every boundary and every leaseMs/3 in between. */
  leaseMs: number;
  /** Attempts after which an unexpected error fails the task instead of retrying. */
  maxAttempts: number;
  /** Builds the task's target clients (credentials per audience, resilience per target). */
  targetsFor(task: TaskRow, tool: LongToolDefinition, delegation: ReadDelegation): TaskTargets;
  /** Builds the task's upstream MCP clients (UPSTREAMS_FILE), like its targets. */
  upstreamsFor?(task: TaskRow, tool: LongToolDefinition, delegation: ReadDelegation): TaskUpstreams;
  logger: Logger;
  /** Aborted on graceful shutdown: the run stops at its next step boundary. */
  drain?: AbortSignal;
  /** The run's job, when the worker loop runs it: a completion completes it too (JobEnd). */
  job?: JobEnd;
  /** Told about each task this worker's runs end (not when another process ended it first). */
  onTaskEnded?: OnTaskEnded;
  /** The worker's clock: when a step started, as journaled (default: the system's). */
  clock?: Clock;
}

/**
 * The job a run came from. A completion completes it in the statement that ends the task
 * (`completion()` is pg-boss's own UPDATE, not run; undefined when this pg-boss does not
 * build one) and sets `completed`, so the worker loop does not complete it again; every other
 * ending leaves that to the loop.
 */
export interface JobEnd {
  completion(): Promise<JobCompletion | undefined>;
  completed: boolean;
}

/** A claim taken before the run: with the task's job, in the statement that fetched it. */
export interface PreClaim {
  claim: ClaimOutcome & { kind: 'claimed' };
  /** performance.now() when that statement was sent (the lease holds from then). */
  sentAt: number;
}

/** What the worker loop does with the job afterwards. */
export type RunResult =
  | 'settled' // terminal now: complete the job
  | 'gone' // nothing to run: complete the job
  | 'released' // shutdown: lease given back; let the job be retried elsewhere
  | 'held' // another live worker has it: retry later
  | 'lost' // lease taken over while running: the other worker owns it now
  | 'expired' // the local lease deadline passed unrenewed (database unreachable): retry later
  | 'paused' // checkpoint mode: waiting for the owner with a fresh token; job done
  | 'unservable' // this worker does not run this tool at the task's schema; job done
  | 'retry'; // unexpected error: retry from the journal

/**
 * Runs (or resumes) one task under a fenced lease: claim, run the tool's steps, settle. `stop`
 * aborts it from outside: a cancel or deadline notification, or shutdown. Finished steps are
 * never run again; on any stop the run waits for its in-flight steps to settle before it
 * records the outcome, so once the task shows `cancelled` no step of this run is still
 * talking to a downstream system. Every write is a transition of the task state machine
 * (packages/tasks/src/task-state).
 */
export async function runTask(
  deps: RunDeps,
  taskId: string,
  stop: AbortSignal,
  /** The claim the worker took with the task's job (claimNextJob), and when it sent it. */
  claimed?: PreClaim,
): Promise<RunResult> {
  // One statement checks the tool is ours at the task's schema, takes the lease and reads
  // the journal (or the fetch of the task's job did).
  const claimSentAt = claimed?.sentAt ?? performance.now();
  const claim =
    claimed?.claim ??
    (await claimTask(deps.pool, {
      taskId,
      workerId: deps.workerId,
      leaseMs: deps.leaseMs,
      served: servedFingerprints(deps.tools),
    }));
  if (claim.kind === 'unservable') return leaveUnservable(deps, taskId, claim);
  if (claim.kind !== 'claimed') return claim.kind;
  const { lease, task, journal } = claim;
  const held: Held = { task, lease, tool: deps.tools.get(task.tool)!.tool };
  const log = deps.logger.child({ taskId, tool: task.tool, epoch: lease.epoch });
  const run = openRunBoundary(deps, taskId, lease, stop, claimSentAt);
  run.observe(claim.boundary);
  const startedAt = performance.now();
  let downstreamSystems = new Set<string>();
  /** The run's last step, taken for its completion to journal (RunBoundary.takeStep). */
  let lastStep: DeferredStep | undefined;
  try {
    // The run's first exchange opens the delegation the claim read; later ones read it again.
    const delegation = createDelegationReads(deps.pool, taskId, claim.delegation, deps.clock);
    const targets = deps.targetsFor(task, held.tool, delegation);
    const upstreams = deps.upstreamsFor?.(task, held.tool, delegation);
    const made = createTaskContext(deps, run, {
      ...held,
      journal,
      targets,
      ...(upstreams ? { upstreams } : {}),
      log,
    });
    downstreamSystems = made.downstreamSystems;
    const structured = await executeThroughOutages(deps, run, { taskId, lease, log }, () =>
      held.tool.execute(made.context, task.arguments as never),
    );
    // The end: the completion's statement reads the boundary itself (a cancel, the deadline,
    // a revocation), so the end reads nothing before it; the last step, if not journaled
    // yet, and a progress report still pending ride on it. An exchange a stage started for a
    // call that never came lands its audit event before the ending's.
    await run.quiesce();
    lastStep = run.takeStep();
    await run.checkKnown();
    const result = held.tool.returnsToolResult
      ? asToolResult(structured, held.tool.name)
      : {
          content: [{ type: 'text', text: JSON.stringify(structured) }],
          structuredContent: structured,
        };
    const progress = run.takeProgress();
    for (let attempt = 1; ; attempt++) {
      // From here on the completion has it (a failed completion is retried from the journal).
      const step = lastStep;
      lastStep = undefined;
      const ended = await finish(deps, held, result, {
        startedAt,
        downstreamSystems,
        ...(progress ? { progress } : {}),
        step,
        atBoundary: true,
        checkBoundary: () => run.check(false, true),
      });
      if (ended !== 'lost' || attempt === 2) return ended;
      // Nothing settled: the lease is gone, or a stop stands. The boundary says which and
      // throws it (the step is then journaled as for any stop); a stop that went away
      // meanwhile (a principal restored) lets the completion try once more.
      lastStep = step;
      await run.check();
    }
  } catch (error) {
    // Nothing may still be running when the outcome is written.
    await run.quiesce();
    // The last step when the end's check stopped the run; otherwise one still waiting.
    const untaken = lastStep ?? run.takeStep();
    const refusal = toolRefusal(error);
    if (refusal) {
      const result = toolErrorResult(refusal.code, refusal.message);
      return await finish(deps, held, result, { startedAt, downstreamSystems, step: untaken });
    }
    const reason = run.stopReason(error);
    // A finished step is journaled before any other ending (a resumed run skips it), unless
    // the lease is gone: then nothing of this run can be written.
    if (reason !== 'lease_lost' && reason !== 'lease_expired')
      await journalLeftover(untaken, run, log);
    if (reason) return await stopped(deps, held, reason, run, log);
    if (error instanceof DelegationEnded)
      return await fail(deps, held, 'delegation_expired', `Stopped: ${error.message}`);
    const message = error instanceof Error ? error.message : String(error);
    log.warn('task attempt failed', { error: message });
    if (task.attempts < deps.maxAttempts) return await release(deps, held, 'retry');
    return await fail(
      deps,
      held,
      'failed',
      `Task failed after ${task.attempts} attempts: ${message}`,
    );
  } finally {
    run.close();
  }
}

/**
 * Journals a step the run finished but had not journaled (its own or the run's waiting one)
 * before the run's other ending is written. A failure is logged: the ending follows anyway,
 * and a resumed run runs the step again.
 */
async function journalLeftover(
  untaken: DeferredStep | undefined,
  run: RunBoundary,
  log: Logger,
): Promise<void> {
  try {
    // Through the run's own queue: one write path, which records the boundary it reads.
    if (untaken) run.deferStep(untaken);
    await run.flushStep();
  } catch (error) {
    if (!(error instanceof StopRun))
      log.warn('step not journaled before the run ended', {
        error: error instanceof Error ? error.message : String(error),
      });
  }
}

/**
 * The tool's own error, reported to the caller rather than retried: a non-retryable
 * ToolError, or a target that refused the request (4xx other than timeout/rate limit) and
 * will refuse it again.
 */
function toolRefusal(error: unknown): { code: string; message: string } | undefined {
  if (isToolError(error)) {
    return error.retryable ? undefined : { code: error.code, message: error.message };
  }
  const e = error as { code?: unknown; status?: unknown; message?: unknown } | null;
  // A path that would leave the target's base path is refused before any request: the same
  // arguments would be refused again.
  if (e?.code === 'invalid_target_path')
    return { code: 'invalid_target_path', message: String(e.message) };
  if (
    e?.code === 'downstream_refused' &&
    typeof e.status === 'number' &&
    e.status >= 400 &&
    e.status < 500 &&
    e.status !== 408 &&
    e.status !== 429
  ) {
    return { code: 'downstream_refused', message: String(e.message) };
  }
  return undefined;
}

/**
 * A tool's own CallToolResult (returnsToolResult): content, structuredContent and isError as
 * the tool gave them, nothing else. One without a content array is the tool's bug: it fails
 * the attempt like any other error, and nothing is stored.
 */
function asToolResult(value: unknown, tool: string) {
  const r = value as { content?: unknown; structuredContent?: unknown; isError?: unknown } | null;
  if (!r || typeof r !== 'object' || !Array.isArray(r.content)) {
    throw new TypeError(`${tool} returned no CallToolResult (a content array is required)`);
  }
  const structured = r.structuredContent;
  return {
    content: r.content as unknown[],
    ...(structured && typeof structured === 'object' && !Array.isArray(structured)
      ? { structuredContent: structured as Record<string, unknown> }
      : {}),
    ...(r.isError === true ? { isError: true } : {}),
  };
}
