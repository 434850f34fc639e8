/**
 * The statuses of a task (MCP's task statuses, which the gateway keeps as they are): the one
 * list every other copy derives from — the task row's and the upstream task's status types,
 * the `mtg_tasks` gauge's labels, the console's status filter and its mapping from audit
 * events. The `app.tasks.status` CHECK constraint is SQL and cannot import it; a test compares
 * that constraint, read from a migrated database, with this list
 * (packages/tasks/test/task-statuses.test.ts).
 */
export const TASK_STATUSES = [
  'working',
  'input_required',
  'completed',
  'failed',
  'cancelled',
] as const;

export type TaskStatus = (typeof TASK_STATUSES)[number];

/** Whether a value (an upstream's answer, a query parameter) is one of the statuses. */
export function isTaskStatus(value: unknown): value is TaskStatus {
  return (TASK_STATUSES as readonly unknown[]).includes(value);
}
