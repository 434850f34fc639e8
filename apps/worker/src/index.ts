export { buildWorker, type Worker } from './build-worker.ts';
export { workerConfigSchema, type WorkerConfig } from './worker-config.ts';
