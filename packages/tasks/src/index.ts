export { CHANNELS } from './channels.ts';
export {
  createTaskService,
  type TaskService,
  type TaskServiceDeps,
  type ProgressNotice,
  type ResultOutcome,
  type TaskReading,
} from './task-service.ts';
export { createTaskEvents, type TaskEvents } from './task-events.ts';
export {
  createBoss,
  createJobQueue,
  installQueue,
  missingQueues,
  HEARTBEAT_SECONDS,
  SUPERVISE_SECONDS,
  jobCompletion,
  jobFetch,
  UnbuiltStatement,
  type FetchedJob,
  type JobFetch,
  type JobCompletion,
  type JobQueue,
} from './job-queue.ts';
export { ADMIN_SCOPE } from './cancel-task.ts';
export {
  aboutTask,
  cancelTaskNow,
  claimNextJob,
  claimTask,
  completeTask,
  expireTask,
  failTask,
  journalStep,
  markInputRequired,
  noteWaitingForWorker,
  parkForApproval,
  parkForInput,
  type PendingInput,
  pauseTask,
  purgeExpired,
  recordStatusMessage,
  releaseLease,
  readBoundary,
  renewLease,
  signalDeadline,
  takeStageGrant,
  type Boundary,
  type PendingProgress,
  type CancelledBy,
  type ClaimOutcome,
  type CompletedStep,
  type ClaimedJob,
  type ClaimedDelegation,
  type Lease,
  type OnTaskEnded,
  type StartInput,
  type StartLimits,
  type StartOutcome,
  type ToolPlacement,
} from './task-state/index.ts';
export type { VerbContext } from './authorize-task.ts';
export {
  ownedTaskOf,
  ownedTaskWithMark,
  type OwnedTaskRow,
  type PrefetchedTask,
} from './authorize-task.ts';
export type { ApprovalView } from './approvals.ts';
export { stepUpScope } from './step-up-scope.ts';
export { STATUS_READ_AUDITS, type StatusReadAudit } from './audit-status-read.ts';
export {
  RESULT_GONE,
  taskError,
  type TaskError,
  type TaskErrorCode,
  type TaskOutcome,
} from './errors.ts';
export { newTaskId, TASK_ID } from './task-id.ts';
export {
  formSchemaProblem,
  type FormField,
  type FormSchema,
  type InputResponse,
} from './input-schema.ts';
export { toView, type TaskRow, type TaskStatus, type TaskView } from './task-row.ts';
export type { StoredResult } from './read-result.ts';
export type { TaskPage } from './list-tasks.ts';
export {
  revocationOf,
  revocationBeside,
  revocationFromRow,
  revokePrincipal,
  restorePrincipal,
  type PrincipalRef,
  type PrincipalRevocationRow,
  type Revocation,
  type RevocationSource,
} from './revoke-principal.ts';
export type { DelegationDeps } from './delegate-task.ts';
export { announceWorker, liveWorkers, retireWorker, countUnservedTasks } from './live-workers.ts';
export {
  createWorkerDirectory,
  preferredWorker,
  wakeChannelOf,
  type WorkerDirectory,
} from './worker-directory.ts';
export { createDenialFold, type DenialFold } from './fold-denials.ts';
export { progressTokenOf, type ProgressToken } from './progress-token.ts';
export { maintenanceSweep, type Sweep } from './maintenance-sweep.ts';
