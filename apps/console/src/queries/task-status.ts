import type { AuditEventType } from '@mtg/audit';
import type { TaskStatus } from '@mtg/tool-kit';

/**
 * A task's status as its audit trail tells it (the console reads the audit views, not
 * app.tasks): the status of its last lifecycle event. One mapping, keyed by every status of
 * TASK_STATUSES (@mtg/tool-kit): a status added there without its events here fails typecheck,
 * and test/e2e/console-task-status.test.ts checks no status is left without an event and no
 * event means two. The task search's SQL and the task page both come from it, so they cannot
 * disagree, and they use the words app.tasks uses: a queued or running task is `working`, a
 * paused one (checkpoint mode: waiting for its owner with a fresh token) `input_required`.
 */
export const STATUS_EVENTS = {
  working: [
    'task.created',
    'task.started',
    'task.lease_taken',
    'task.step_completed',
    'task.resumed',
    // Its caller answered, its approver decided, its upstream got its input: running again.
    'task.input_resolved',
    'task.input_received',
    'task.approved',
    'task.rejected',
  ],
  input_required: [
    'task.paused',
    // An upstream task waiting for input (mirrored; its worker still holds the lease).
    'task.input_required',
    // Parked on a question to its caller or a second person's approval.
    'task.input_requested',
    'task.approval_requested',
  ],
  completed: ['task.completed'],
  failed: ['task.failed'],
  cancelled: ['task.cancelled', 'task.admin_cancelled'],
} as const satisfies Record<TaskStatus, readonly AuditEventType[]>;

type LifecycleEvent = (typeof STATUS_EVENTS)[TaskStatus][number];

const statusByEvent = new Map<string, TaskStatus>(
  (Object.entries(STATUS_EVENTS) as Array<[TaskStatus, readonly LifecycleEvent[]]>).flatMap(
    ([status, events]) => events.map((event) => [event, status] as const),
  ),
);

/** Every event that sets a task's status, each once. */
export const LIFECYCLE_EVENTS: readonly string[] = [...statusByEvent.keys()];

/** The status a task's events (oldest first) tell; undefined when none is a lifecycle event. */
export function statusOfEvents(types: readonly string[]): TaskStatus | undefined {
  for (let i = types.length - 1; i >= 0; i--) {
    const status = statusByEvent.get(types[i]!);
    if (status) return status;
  }
  return undefined;
}

// The mapping becomes SQL text: every name in it is a plain dotted word, checked here, so the
// generated literals need no quoting.
const literal = (word: string) => {
  if (!/^[a-z_.]+$/.test(word)) throw new Error(`not a plain status or event name: ${word}`);
  return `'${word}'`;
};

/**
 * The SQL for the same mapping, over `audit.task_timeline` rows grouped by task: the status of
 * the task's last lifecycle event, by the timeline's order (time, then chain and sequence).
 */
export const STATUS_OF_SQL = `CASE (array_agg(type ORDER BY occurred_at DESC, chain_id DESC, seq DESC) FILTER (WHERE type IN (${LIFECYCLE_EVENTS.map(literal).join(', ')})))[1]
    ${[...statusByEvent].map(([event, status]) => `WHEN ${literal(event)} THEN ${literal(status)}`).join('\n    ')}
  END`;
