import { nowMs, systemClock, type Clock } from '@mtg/clock';
import type { Pool } from 'pg';
import type { ReadRouter } from '@mtg/db';
import { appendAuditGrouped } from '@mtg/audit';
import type { Principal } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import type { LongToolDefinition } from '@mtg/tools';
import { auditStatusRead, type StatusReadAudit } from './audit-status-read.ts';
import {
  authorizeTask,
  deny,
  readKeys,
  taskReadKey,
  type OwnedTaskRow,
  type VerbContext,
  type PrefetchedTask,
} from './authorize-task.ts';
import { WORKER_LOST_MESSAGE } from './task-state/predicates.ts';
import { cancelTask, type CancelOptions } from './cancel-task.ts';
import { CHANNELS } from './channels.ts';
import {
  createTask,
  type StartInput,
  type StartLimits,
  type StartOutcome,
  type ToolPlacement,
} from './task-state/create-task.ts';
import { RESULT_GONE, taskError, type TaskOutcome } from './errors.ts';
import type { JobQueue } from './job-queue.ts';
import type { DelegationDeps } from './delegate-task.ts';
import { createDenialFold } from './fold-denials.ts';
import { resumeIfPaused } from './task-state/resume-task.ts';
import { watchSettle } from './task-state/watch-settle.ts';
import {
  answeredAlready,
  pendingInput,
  recordAnswer,
  type PendingInput,
} from './task-state/ask-input.ts';
import { answerProblem, answerSummary, type InputResponse } from './input-schema.ts';
import { decideApproval, listApprovals, type ApprovalView } from './approvals.ts';
import type { OnTaskEnded } from './task-state/settle-task.ts';
import { isReadableCursor, listTasks, type TaskPage } from './list-tasks.ts';
import { readKeptResult, readResult, type StoredResult } from './read-result.ts';
import type { TaskEvents } from './task-events.ts';
import type { WorkerDirectory } from './worker-directory.ts';
import { TASK_ID } from './task-id.ts';
import {
  claimProgressNotice,
  readProgressToken,
  rememberProgressToken,
  type ProgressToken,
} from './progress-token.ts';
import { isTerminal, toView, type TaskView, type VerbTaskRow } from './task-row.ts';

export interface TaskServiceDeps {
  /** The primary: every write, lock, audit append, and every read that must be exact. */
  pool: Pool;
  /**
   * Where status reads, result reads of kept results and lists may go instead (the read
   * replica, DATABASE_READ_URL), with read-your-writes after this service's own starts and
   * cancels (docs/scaling.md, "Read replicas"). Unset: every read on `pool`.
   */
  reads?: ReadRouter;
  queue: JobQueue;
  events: TaskEvents;
  tools: ReadonlyMap<string, LongToolDefinition>;
  /** The queue and version a tool's new tasks get (from the registry). */
  placement(tool: string): ToolPlacement;
  /**
   * The live workers (app.workers): a created task's notification goes to the chosen worker's
   * own channel, and a queued task whose queue no live worker serves says so in its status.
   * Unset: every notification goes to the shared channel, and serving is not checked.
   */
  workers?: WorkerDirectory;
  limits: StartLimits;
  /** Task-bound delegation at creation; without it tasks carry no user credential. */
  delegation?: DelegationDeps;
  /**
   * Which status reads are audited: the first by each caller after each change of status, or
   * every one (audit-status-read.ts). Result reads and denials always are.
   */
  statusReadAudit: StatusReadAudit;
  /** How long cancel waits for the running worker to acknowledge the stop. */
  cancelAckTimeoutMs: number;
  /** Told about each task a cancel ends here (no live worker held it, or none answered). */
  onTaskEnded?: OnTaskEnded;
  /** The gateway's clock (default: the system's), for what is computed outside SQL. */
  clock?: Clock;
  /** How long one caller's repeats of one denial fold into one audit event (default 60 s). */
  denialWindowMs?: number;
  /** Where a failure to write a folded denial summary is reported. */
  logger: Pick<Logger, 'warn'>;
  /**
   * The task row the request being served read already, beside its revocation check (the
   * gateway's polls: one round trip); the read verbs take it instead of reading again.
   */
  prefetched?: PrefetchedTask;
}

export type ResultOutcome = TaskOutcome<{
  task: TaskView;
  row: VerbTaskRow;
  result?: StoredResult;
  /** awaitResult with `untilInput`: the task is parked on this question (no result yet). */
  input?: PendingInput;
}>;

/**
 * A task as its owner may see it now. With `withResult`, a completed task also brings its
 * stored result, or `'gone'` once that result's retention passed or a delete-on-read
 * retrieval took it; the task's status is the row's either way (a terminal task never changes
 * status, whatever became of its result).
 */
export interface TaskReading {
  task: TaskView;
  row: VerbTaskRow;
  result?: StoredResult | 'gone';
}

/** A progress notification a result wait may send (awaitResult's `onProgress`). */
export interface ProgressNotice {
  progressToken: ProgressToken;
  progress: number;
  total?: number;
  message?: string;
}

/** The one task service every wire calls. Each verb authorizes the caller itself. */
export interface TaskService {
  /**
   * `progressToken`: the starting request's (2025-11-25 task-augmented call), kept for the
   * task's lifetime; a repeat that joins the live task replaces it with its own.
   */
  start(input: StartInput & { progressToken?: ProgressToken }): Promise<StartOutcome>;
  get(taskId: string, ctx: VerbContext): Promise<TaskOutcome<{ task: TaskView; row: VerbTaskRow }>>;
  /**
   * get(), and with `withResult` an ended task's result, in one verb: one authorization, one
   * rate-limit point; for an ended task one audit event, its retrieval (`task.result_read`,
   * always), or for a result no longer stored `task.status_read` (under the deps'
   * `statusReadAudit`) and the `result_gone` denial; else `task.status_read`, as for get().
   * For answers that carry status and result together (2026 tasks/get, get_job_result).
   */
  read(
    taskId: string,
    ctx: VerbContext,
    /** `verb`: how the read is named in authorization and audit (default `get`). */
    options: { withResult: boolean; verb?: 'get' | 'result' },
  ): Promise<TaskOutcome<TaskReading>>;
  /** The stored result of a terminal task; `result_not_ready` while it runs. */
  result(taskId: string, ctx: VerbContext): Promise<ResultOutcome>;
  /**
   * Like result(), but waits (up to waitMs) for the task to end first; with `untilInput`,
   * also returns (with `input`) once the task is parked on a question to its caller.
   */
  awaitResult(
    taskId: string,
    ctx: VerbContext,
    waitMs: number,
    /**
     * `asked`: questions already put to this caller on this wait (not returned again).
     * `onProgress`: called while the task runs, each time its progress has gone above what
     * was last sent with its progress token (if it has one), on any stream.
     */
    options?: {
      untilInput?: boolean;
      asked?: readonly string[];
      onProgress?: (notice: ProgressNotice) => Promise<void>;
    },
  ): Promise<ResultOutcome>;
  /**
   * The owner answers the question the task is parked on (ctx.ask): validated against its
   * form, journaled as the step it is and audited (`task.input_received`, redacted), and the
   * task resumes. `key` names the question answered (a stale one is refused).
   */
  answer(
    taskId: string,
    ctx: VerbContext,
    answer: { key?: string; response: unknown },
  ): Promise<TaskOutcome<{ task: TaskView }>>;
  cancel(
    taskId: string,
    ctx: VerbContext,
    options?: CancelOptions,
  ): Promise<TaskOutcome<{ task: TaskView }>>;
  list(ctx: VerbContext, page: { cursor?: string; limit?: number }): Promise<TaskOutcome<TaskPage>>;
  /** The open approvals of other subjects of the caller's tenant, for scopes its token holds. */
  approvals(ctx: VerbContext): Promise<TaskOutcome<{ approvals: ApprovalView[] }>>;
  /** A second principal approves or rejects a task waiting for approval (approvals.ts). */
  decide(
    taskId: string,
    ctx: VerbContext,
    decision: { approved: boolean; reason?: string },
  ): Promise<TaskOutcome<{ approval: ApprovalView }>>;
  toolScope(tool: string): string | undefined;
}

export function createTaskService(options: TaskServiceDeps): TaskService {
  const deps = {
    ...options,
    denials: createDenialFold({
      pool: options.pool,
      windowMs: options.denialWindowMs ?? 60_000,
      onSummaryFailed: (error) =>
        options.logger.warn('denial summary audit failed', { error: error.message }),
    }),
  };
  // A task that ended anywhere (a worker, a cancel through another gateway replica): every
  // gateway hears of it at its commit, and reads it from the primary until the replica has
  // replayed that far, so a poll never shows a task running that its owner saw end.
  if (deps.reads) {
    const reads = deps.reads;
    deps.events.on(CHANNELS.settled, (payload) => {
      if (typeof payload.taskId === 'string' && TASK_ID.test(payload.taskId))
        void reads.wrote([taskReadKey(payload.taskId)]);
    });
  }
  const scopeOf = (tool: string) => deps.tools.get(tool)?.scope;
  const owner = (p: Principal) => ({ tenant: p.tenant, subject: p.subject, client: p.client });

  /** A task nobody has picked up, on a queue no live worker serves, says what it waits for. */
  const viewOf = async (row: OwnedTaskRow): Promise<TaskView> => {
    const view = toView(row);
    // Its worker died and no other has taken it yet: say so rather than its last progress.
    if (row.worker_lost) view.statusMessage = WORKER_LOST_MESSAGE;
    if (
      deps.workers &&
      row.status === 'working' &&
      row.lease_owner === null &&
      row.started_at === null &&
      !(await deps.workers.serves(row.job_queue))
    ) {
      view.statusMessage = `waiting for a worker that runs ${row.tool}`;
    }
    return view;
  };

  const service: TaskService = {
    toolScope: scopeOf,
    async start(input) {
      const { progressToken, ...start } = input;
      const outcome = await createTask(deps, start);
      if (outcome.ok) await deps.reads?.wrote(readKeys(input.principal, outcome.task.id));
      if (outcome.ok && progressToken !== undefined && !isTerminal(outcome.task.status))
        await rememberProgressToken(deps.pool, outcome.task.id, progressToken);
      return outcome;
    },

    async get(taskId, ctx) {
      const r = await service.read(taskId, ctx, { withResult: false });
      return r.ok ? { ok: true, task: r.task, row: r.row } : r;
    },

    async read(taskId, ctx, options) {
      const auth = await authorizeTask(
        deps,
        taskId,
        options.verb ?? 'get',
        ctx,
        scopeOf,
        deps.reads,
      );
      if (!auth.ok) return auth;
      // The resume is a conditional UPDATE on the primary: a stale row from the replica can
      // at worst find nothing to resume.
      const row = await resumeIfPaused(deps, auth.task, scopeOf(auth.task.tool) ?? '', ctx);
      if (row !== auth.task) await deps.reads?.wrote(readKeys(ctx.principal, taskId));
      // A read that brings an ended task's result is one event, that retrieval (below): its
      // `task.result_read` names the status it showed, so a second event for the same read
      // would tell an auditor nothing more (docs/audit.md). One that finds the result gone is
      // still a status read: its denial may fold with others.
      const statusRead = () => auditStatusRead(deps.pool, deps.statusReadAudit, row, ctx);
      const retrieval = options.withResult && isTerminal(row.status);
      if (!retrieval) await statusRead();
      const reading: TaskReading = { task: await viewOf(row), row };
      if (reading.task.inputFrom === 'caller') {
        const q = await pendingInput(deps.pool, row.id);
        if (q?.kind === 'approval') {
          reading.task.inputFrom = 'approver';
          reading.task.approval = { key: q.key, scope: q.scope ?? '', reason: q.message };
        }
        if (q?.kind === 'input')
          reading.task.input = {
            key: q.key,
            message: q.message,
            requestedSchema: q.requestedSchema,
          };
      }
      // Asked for the result of an ended task: always audited, as result() is.
      if (options.withResult && row.status === 'completed')
        reading.result = (await takeResult(row, ctx, 'get', deps.reads, statusRead)) ?? 'gone';
      else if (options.withResult && isTerminal(row.status))
        await auditResultRead(row, ctx, undefined);
      return { ok: true, ...reading };
    },

    result: (taskId, ctx) => resultOf(taskId, ctx, deps.reads),

    async answer(taskId, ctx, answer) {
      const auth = await authorizeTask(deps, taskId, 'answer', ctx, scopeOf);
      if (!auth.ok) return auth;
      const row = auth.task;
      const q = row.status === 'input_required' ? await pendingInput(deps.pool, row.id) : undefined;
      const notWaiting = taskError(
        'invalid_params',
        `Task ${taskId} is not waiting for an answer${answer.key ? ` to ${answer.key}` : ''} (it is ${row.status})`,
      );
      if (!q || q.kind !== 'input' || (answer.key !== undefined && answer.key !== q.key)) {
        // The retry of an answer whose reply was lost (its commit's outcome unknown,
        // answered "unavailable"): the same answer from the same caller is recorded, so the
        // retry gets the reply the first attempt would have, and nothing is written again.
        const by = { subject: ctx.principal.subject, client: ctx.principal.client };
        if (await answeredAlready(deps.pool, row.id, by, answer))
          return { ok: true, task: toView(row) };
        return notWaiting;
      }
      const problem = answerProblem(q.requestedSchema, answer.response);
      if (problem)
        return taskError(
          'invalid_params',
          `Invalid answer: ${problem}; the task still waits for it`,
        );
      const response = answer.response as InputResponse;
      const recorded = await recordAnswer(deps, {
        task: row,
        key: q.key,
        response,
        summary: answerSummary(q.requestedSchema, response, q.keepAnswer),
        by: { subject: ctx.principal.subject, client: ctx.principal.client },
        correlationId: ctx.correlationId,
        wire: ctx.wire,
      });
      if (!recorded) return notWaiting;
      await deps.reads?.wrote(readKeys(ctx.principal, taskId));
      return {
        ok: true,
        task: toView({
          ...row,
          status: 'working',
          status_message: 'Answer received',
          updated_at: (deps.clock ?? systemClock)(),
        }),
      };
    },

    async awaitResult(taskId, ctx, waitMs, options) {
      const until = nowMs(deps.clock) + waitMs;
      let token: { value: ProgressToken | undefined } | undefined;
      // The ending notifies only once watched (watch-settle.ts): once per wait, not per look.
      let watched = false;
      // On the primary: the settle that wakes the wait is there at once, perhaps not yet on
      // the replica (and a blocking wait is far rarer than a poll).
      for (;;) {
        const seen: { row?: VerbTaskRow } = {};
        const outcome = await resultOf(taskId, ctx, undefined, {
          ...options,
          seen: (row) => (seen.row = row),
        });
        if (outcome.ok || outcome.code !== 'result_not_ready' || nowMs(deps.clock) >= until)
          return outcome;
        const progress = seen.row?.progress;
        if (options?.onProgress && progress) {
          token ??= { value: await readProgressToken(deps.pool, taskId) };
          if (
            token.value !== undefined &&
            (await claimProgressNotice(deps.pool, taskId, token.value, progress.current))
          ) {
            const message = seen.row?.status_message;
            await options.onProgress({
              progressToken: token.value,
              progress: progress.current,
              ...(progress.total > 0 ? { total: progress.total } : {}),
              ...(message ? { message } : {}),
            });
          }
        }
        // A question or a step's progress is no settle: while one may come, look each second.
        // Listening before the watch commits, so an ending right after it is heard.
        const stop = new AbortController();
        const settled = deps.events.waitForSettled(
          taskId,
          Math.min(
            until - nowMs(deps.clock),
            options?.untilInput || options?.onProgress ? 1000 : 5000,
          ),
          CHANNELS.settled,
          stop.signal,
        );
        if (!watched) {
          watched = true;
          let watching: boolean;
          try {
            await deps.events.heard(CHANNELS.settled);
            watching = await watchSettle(deps.pool, taskId);
          } catch (error) {
            stop.abort();
            throw error;
          }
          if (!watching) {
            // It ended since the read: read it again now (once; after that, on the timer).
            stop.abort();
            continue;
          }
        }
        await settled;
      }
    },

    async cancel(taskId, ctx, options) {
      const outcome = await cancelTask(deps, scopeOf, taskId, ctx, options ?? {});
      // Whatever the outcome, the row may have changed on the primary (a settle, a flag).
      if (TASK_ID.test(taskId)) await deps.reads?.wrote(readKeys(ctx.principal, taskId));
      return outcome;
    },

    async approvals(ctx) {
      return { ok: true, approvals: await listApprovals(deps.pool, ctx.principal) };
    },

    async decide(taskId, ctx, decision) {
      const outcome = await decideApproval(deps, taskId, ctx, decision);
      if (TASK_ID.test(taskId)) await deps.reads?.wrote([taskReadKey(taskId)]);
      return outcome;
    },

    async list(ctx, page) {
      if (!isReadableCursor(page.cursor))
        return taskError(
          'invalid_params',
          'Invalid cursor: pass a nextCursor this server returned',
        );
      // As the other verbs: a task of a tool whose scope the token lacks is not the caller's
      // to see (a tool no longer served needs no scope, as in authorizeTask).
      const withheld = [...deps.tools.values()]
        .filter((t) => t.scope && !ctx.principal.scopes.includes(t.scope))
        .map((t) => t.name);
      const list = (db: Pool) => listTasks(db, ctx.principal, page, withheld);
      const tasks = deps.reads
        ? (await deps.reads.read(readKeys(ctx.principal), list)).value
        : await list(deps.pool);
      return { ok: true, ...tasks };
    },
  };

  /** result(), its row (and kept result) from the replica when `reads` is given. */
  async function resultOf(
    taskId: string,
    ctx: VerbContext,
    reads: ReadRouter | undefined,
    input?: {
      untilInput?: boolean;
      asked?: readonly string[];
      /** Told the task's row once the caller is authorized for it. */
      seen?: (row: VerbTaskRow) => void;
    },
  ): Promise<ResultOutcome> {
    const auth = await authorizeTask(deps, taskId, 'result', ctx, scopeOf, reads);
    if (!auth.ok) return auth;
    const task = auth.task;
    input?.seen?.(task);
    if (input?.untilInput && task.status === 'input_required' && !task.needs_live_user) {
      const q = await pendingInput(deps.pool, task.id);
      if (q?.kind === 'input' && !input.asked?.includes(q.key))
        return { ok: true, task: toView(task), row: task, input: q };
    }
    if (!isTerminal(task.status)) {
      return taskError('result_not_ready', `Task is ${task.status}; its result is not ready yet`);
    }
    if (task.status !== 'completed') {
      await auditResultRead(task, ctx, undefined);
      return { ok: true, task: toView(task), row: task };
    }
    const stored = await takeResult(task, ctx, 'result', reads);
    if (!stored) return RESULT_GONE;
    return { ok: true, task: toView(task), row: task, result: stored };
  }

  /**
   * A completed task's stored result (deleted by the same read if delete-on-read), audited
   * as `task.result_read`; undefined, audited as the `result_gone` denial (after `gone`, if
   * given), once it is not stored any more.
   */
  async function takeResult(
    task: VerbTaskRow,
    ctx: VerbContext,
    verb: string,
    reads?: ReadRouter,
    gone?: () => Promise<void>,
  ): Promise<StoredResult | undefined> {
    // A kept result may come from the replica (its row and the task's end commit together);
    // a delete-on-read one, or none there, is the primary's to take or to deny.
    const kept = reads
      ? (await reads.read(readKeys(ctx.principal, task.id), (db) => readKeptResult(db, task.id)))
          .value
      : undefined;
    const stored = kept ?? (await readResult(deps.pool, task.id));
    if (stored) await auditResultRead(task, ctx, stored);
    else {
      await gone?.();
      await deny(deps, ctx, verb, task.id, 'result_gone', task.tool);
    }
    return stored;
  }

  async function auditResultRead(task: VerbTaskRow, ctx: VerbContext, stored?: StoredResult) {
    await appendAuditGrouped(deps.pool, {
      type: 'task.result_read',
      taskId: task.id,
      ...owner(ctx.principal),
      tool: task.tool,
      correlationId: ctx.correlationId,
      data: {
        wire: ctx.wire,
        status: task.status,
        ...(stored ? { sizeBytes: stored.sizeBytes, deletedOnRead: stored.deletedOnRead } : {}),
      },
    });
  }

  return service;
}
