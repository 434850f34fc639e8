/** The worker's configuration and the registry disagree: it stops at start (exit 2). */
export class WorkerSetupError extends Error {
  readonly code = 'worker_setup';
  constructor(message: string) {
    super(message);
    this.name = 'WorkerSetupError';
  }
}
