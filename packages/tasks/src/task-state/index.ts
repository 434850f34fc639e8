/**
 * The task state machine: every write of app.tasks and app.task_steps is one of these
 * transitions, each with its SQL, its fence, its audit event and its hook, in one
 * transaction where it needs one. No other module writes those tables.
 *
 *   create ─▶ working ──claim──▶ working (leased) ──journal/progress/renew──▶ …
 *                │                     │ pause ─▶ input_required ──resume──▶ working
 *                │                     │ await input ⇄ input_required (leased: a downstream waits)
 *                │                     │ park for input ─▶ input_required ──record answer──▶ working
 *                │                     │ park for approval ─▶ input_required ──record decision──▶ working
 *                │                     ├ complete ─▶ completed
 *                │                     ├ fail ─────▶ failed
 *                │                     └ release / reap ─▶ working (unleased)
 *                ├ request cancel / flag revoked ─▶ (flagged) ──cancel now──▶ cancelled
 *                └ expire (deadline, nobody holds it) ─▶ failed
 *   ended + ttl ──purge──▶ gone
 *
 * Predicates (predicates.ts): ACTIVE, NOT_ENDED, LIVE_LEASE, fenced(), RETAINED, OWNER_MATCH.
 */
export { ACTIVE, LIVE_LEASE, NOT_ENDED, OWNER_MATCH, RETAINED, fenced } from './predicates.ts';
export {
  createTask,
  type StartInput,
  type StartLimits,
  type StartOutcome,
  type ToolPlacement,
} from './create-task.ts';
export {
  claimNextJob,
  claimTask,
  noteWaitingForWorker,
  type ClaimOutcome,
  type ClaimedDelegation,
  type ClaimedJob,
} from './claim-task.ts';
export {
  releaseLease,
  readBoundary,
  renewLease,
  type Boundary,
  type Lease,
  type PendingProgress,
} from './lease.ts';
export { journalStep, recordStatusMessage, takeStageGrant } from './journal-step.ts';
export { aboutTask } from './about-task.ts';
export {
  cancelTaskNow,
  completeTask,
  expireTask,
  failTask,
  pauseTask,
  type CancelledBy,
  type CompletedStep,
  type EndDeps,
  type FinishedResult,
} from './end-task.ts';
export { resumeIfPaused } from './resume-task.ts';
export { markInputRequired } from './await-input.ts';
export { parkForInput, pendingInput, recordAnswer, type PendingInput } from './ask-input.ts';
export { parkForApproval, recordDecision, type DecisionOutcome } from './await-approval.ts';
export { flagPrincipalTasks, requestCancel } from './request-cancel.ts';
export { watchSettle } from './watch-settle.ts';
export { purgeExpired, signalDeadline, type LateTask } from './purge-tasks.ts';
export type { OnTaskEnded, Settlement } from './settle-task.ts';
