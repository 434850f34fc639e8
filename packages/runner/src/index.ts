export {
  runTask,
  type RunDeps,
  type RunResult,
  type ServedTool,
  type TaskTargets,
} from './run-task.ts';
export { StopRun, abortableSleep, type StopReason } from './stop.ts';
export { claimLease, renewAndCheck, releaseLease, type Lease } from './lease.ts';
export { createWorkerLoop, stopReasonOf, type WorkerLoopOptions } from './worker-loop.ts';
export { createMaintenance } from './maintenance.ts';
export {
  createTaskCredentials,
  DelegationEnded,
  type TaskCredentials,
  type TaskCredentialDeps,
} from './task-credentials.ts';
