/** Project-owned LISTEN/NOTIFY channels (payloads are JSON). */
export const CHANNELS = {
  /** A task was created and its job enqueued: `{ taskId, queue }`. Wakes the workers of that queue. */
  created: 'mtg_task_created',
  /** Stop a running task now: `{ taskId, reason }` (cancel, deadline, revocation). */
  control: 'mtg_task_control',
  /** A task reached a terminal state: `{ taskId, status }`. Wakes waiting verbs. */
  settled: 'mtg_task_settled',
} as const;
