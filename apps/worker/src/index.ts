export { buildWorker, type Worker } from './build-worker.ts';
export { workerConfigSchema, type WorkerConfig } from './worker-config.ts';
export { WorkerSetupError } from './worker-setup-error.ts';
