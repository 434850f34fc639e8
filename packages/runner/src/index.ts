export { runTask, type RunDeps, type RunResult } from './run-task.ts';
export { StopRun, ToolError, abortableSleep, type StopReason } from './stop.ts';
export { claimLease, renewAndCheck, releaseLease, type Lease } from './lease.ts';
export { createWorkerLoop, type WorkerLoopOptions } from './worker-loop.ts';
export { createMaintenance } from './maintenance.ts';
export {
  createTaskCredentials,
  DelegationEnded,
  type TaskCredentials,
  type TaskCredentialDeps,
} from './task-credentials.ts';
