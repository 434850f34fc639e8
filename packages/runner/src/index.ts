export {
  runTask,
  type RunDeps,
  type RunResult,
  type ServedTool,
  type TaskTargets,
  type TaskUpstreams,
} from './run-task.ts';
export { StopRun } from './stop.ts';
export { createWorkerLoop, stopReasonOf } from './worker-loop.ts';
export { createMaintenance } from './maintenance.ts';
export { createWorkerPeers, type WorkerPeers } from './worker-peers.ts';
export {
  createTaskCredentials,
  type ReadDelegation,
  type TaskCredentialDeps,
} from './task-credentials.ts';
