import { systemClock } from '@mtg/clock';
import { inSpan } from '@mtg/telemetry';
import type { Logger } from '@mtg/log';
import {
  journalStep,
  formSchemaProblem,
  markInputRequired,
  parkForApproval,
  parkForInput,
  takeStageGrant,
  aboutTask,
  type CompletedStep,
  type Lease,
  type TaskRow,
} from '@mtg/tasks';
import { ToolError, type TargetClient, type UpstreamTaskClient } from '@mtg/tool-kit';
import type { LongToolDefinition, TaskContext } from '@mtg/tools';
import type { RunBoundary } from './run-boundary.ts';
import { toStop } from './run-boundary.ts';
import type { RunDeps, TaskTargets, TaskUpstreams } from './run-task.ts';
import { abortableSleep, StopRun } from './stop.ts';

/**
 * The capabilities a tool's `execute` gets for one run (graphile-worker's JobHelpers):
 * journaled steps, its declared targets, progress, an abortable sleep, the run's signal and
 * logger. Everything it writes goes through the task state machine, fenced by the lease.
 */
export function createTaskContext(
  deps: Pick<RunDeps, 'pool' | 'workerId' | 'clock'>,
  run: RunBoundary,
  r: {
    task: TaskRow;
    lease: Lease;
    tool: LongToolDefinition;
    journal: Map<string, unknown>;
    targets: TaskTargets;
    /** The worker's upstream MCP servers (UPSTREAMS_FILE), when it has any. */
    upstreams?: TaskUpstreams;
    log: Logger;
  },
): { context: TaskContext; downstreamSystems: Set<string> } {
  const { task, lease, tool, journal, targets, upstreams } = r;
  let seq = journal.size;
  const clients = new Map<string, TargetClient>();
  const upstreamClients = new Map<string, UpstreamTaskClient>();
  const declared = tool.origin?.targets ?? [];
  const declaredUpstreams = tool.origin?.upstreams ?? [];
  const downstreamSystems = new Set<string>();
  // What the task waits for, as its row says at the claim (a resumed run may find it waiting).
  // Questions are named in the order the tool asks them, as the journal names them.
  let asks = 0;
  let approvals = 0;
  /** Parks the run on a question (the transition written) and unwinds it. */
  const park = async (write: () => Promise<boolean>): Promise<never> => {
    // Nothing of this run may still be running once the lease is given back.
    await run.quiesce();
    await run.check(true, true);
    throw new StopRun((await write()) ? 'awaiting_input' : 'lease_lost');
  };
  let awaiting: string | null =
    task.status === 'input_required' ? (task.status_message ?? '') : null;

  const runStep = async (name: string, fn: (signal: AbortSignal) => Promise<unknown>) => {
    await run.check(true, true);
    if (task.needs_live_user && !(await takeStageGrant(deps.pool, task.id, lease))) {
      throw new StopRun('paused');
    }
    targets.beginStage();
    upstreams?.beginStage();
    // Tracked: nothing of the run may still be running when it ends or parks.
    const exchanges = targets.prefetch?.();
    if (exchanges) void run.track(exchanges);
    const stepStarted = (deps.clock ?? systemClock)();
    const stepT0 = performance.now();
    let output;
    try {
      output = await inSpan(`step ${name}`, { attributes: { 'mtg.step': name } }, () =>
        fn(run.signal),
      );
    } catch (error) {
      if (run.signal.aborted) throw toStop(run.signal.reason);
      throw error;
    }
    const step: CompletedStep = {
      name,
      seq: ++seq,
      output,
      startedAt: stepStarted,
      event: {
        type: 'task.step_completed',
        ...aboutTask(task),
        data: {
          step: name,
          durationMs: Math.round(performance.now() - stepT0),
          worker: deps.workerId,
        },
      },
    };
    // Journaled by the run's next statement (RunBoundary.deferStep): the next step's check
    // or a call's, or for the run's last step its completion.
    run.deferStep({
      step,
      write: (progress) => journalStep(deps.pool, task.id, lease, step, () => step.event, progress),
    });
    journal.set(name, output);
    return output;
  };

  const context: TaskContext = {
    taskId: task.id,
    owner: { tenant: task.tenant, subject: task.subject, client: task.client },
    signal: run.signal,
    logger: r.log,
    sleep: (ms) =>
      abortableSleep(ms, run.signal).catch((e) => {
        throw toStop(e);
      }),
    target(name) {
      if (!declared.includes(name)) {
        throw new TypeError(
          `tool ${tool.name} asked for target ${JSON.stringify(name)}, which its pack does not declare (declared: ${declared.join(', ') || 'none'})`,
        );
      }
      let client = clients.get(name);
      if (!client) {
        // Every call is preceded by a boundary check: lease, cancel, deadline and the owner's
        // revocation status, so no call starts for a stopped task.
        client = targets.client(name, {
          signal: run.signal,
          beforeCall: async () => {
            await run.check();
            downstreamSystems.add(name);
          },
        });
        clients.set(name, client);
      }
      return client;
    },
    upstream(name) {
      // As for targets: a pack acts as its users only where it said it would.
      if (!declaredUpstreams.includes(name)) {
        throw new TypeError(
          `tool ${tool.name} asked for upstream ${JSON.stringify(name)}, which its pack does not declare (declared: ${declaredUpstreams.join(', ') || 'none'})`,
        );
      }
      let client = upstreamClients.get(name);
      if (!client) {
        if (!upstreams) throw new TypeError(`this worker has no upstreams (UPSTREAMS_FILE)`);
        // Like a target: every call after the task's boundary check.
        client = upstreams.client(name, {
          signal: run.signal,
          beforeCall: async () => {
            await run.check();
            downstreamSystems.add(`upstream:${name}`);
          },
        });
        upstreamClients.set(name, client);
      }
      return client;
    },
    async progress(current, total, message) {
      run.reportProgress({ current, total, message });
    },
    async inputRequired(message, downstream) {
      // A checkpoint-mode task's input_required is its owner's (pauseTask): not mirrored.
      if (task.needs_live_user) return;
      const said = message === null ? null : message.slice(0, 500);
      // Polls that find the same state write nothing (lastUpdatedAt stays the change's).
      if (said === awaiting) return;
      // A progress report still pending would land after this change and overwrite its
      // message: the boundary check writes it first.
      await run.check(false, false, true);
      const moved = await markInputRequired(deps.pool, {
        task,
        lease,
        workerId: deps.workerId,
        message: said,
        downstream,
      });
      if (!moved) throw new StopRun('lease_lost');
      awaiting = said;
    },
    async ask(question) {
      const key = `ask:${++asks}`;
      if (journal.has(key)) return journal.get(key) as never;
      const problem = formSchemaProblem(question.schema);
      if (problem) throw new TypeError(`tool ${tool.name} asked with an invalid form: ${problem}`);
      if (typeof question.message !== 'string' || question.message.length === 0)
        throw new TypeError(`tool ${tool.name} asked without a message`);
      return park(() =>
        parkForInput(deps.pool, {
          task,
          lease,
          workerId: deps.workerId,
          key,
          message: question.message,
          schema: question.schema,
          keepAnswer: question.keepAnswerInAudit === true,
        }),
      );
    },
    async approval(request) {
      const key = `approval:${++approvals}`;
      if (journal.has(key)) {
        const d = journal.get(key) as {
          approved: boolean;
          approver: { subject: string; client: string };
          reason?: string;
        };
        if (d.approved) return { approved: true, approver: d.approver };
        // Not retryable: the task ends with the approver's reason as its tool error.
        throw new ToolError(
          'approval_rejected',
          `Rejected by ${d.approver.subject}${d.reason ? `: ${d.reason}` : ''}`,
        );
      }
      if (!tool.approvalScopes?.includes(request.scope) || !request.reason)
        throw new TypeError(
          `tool ${tool.name} asked for approval with scope ${JSON.stringify(request.scope)}, which it does not declare in approvalScopes (or without a reason)`,
        );
      return park(() =>
        parkForApproval(deps.pool, {
          task,
          lease,
          workerId: deps.workerId,
          key,
          scope: request.scope,
          reason: request.reason,
          summary: request.summary ?? {},
        }),
      );
    },
    step(name, fn) {
      if (journal.has(name)) return Promise.resolve(journal.get(name) as never);
      return run.track(runStep(name, fn)) as never;
    },
  };
  return { context, downstreamSystems };
}
