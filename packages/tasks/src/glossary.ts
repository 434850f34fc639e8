/**
 * Terms used across this package.
 *
 * - task: one long tool call, a row in app.tasks, owned by the principal that created it.
 * - owner: the (tenant, subject, client) triple bound at creation; every verb matches it.
 * - verb: start, get (status), result, cancel, list — each authorized on every call.
 * - job: the pg-boss job that carries a task to a worker; inserted in the task's transaction.
 * - step: a named unit of a tool's work; its output is journaled in app.task_steps.
 * - lease: a worker's claim on a task, fenced by lease_epoch; a takeover bumps the epoch.
 * - terminal: completed | failed | cancelled. Terminal rows never change status again.
 * - dedupe key: the idempotency key while it still deduplicates starts.
 * - transition: a change of a task's rows; every one is a function of the task state machine
 *   (task-state/), which is the only writer of app.tasks and app.task_steps.
 */
export {};
