import type { Queryable } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { checkDatabase } from './check-database.ts';

export interface WorkerDeps {
  db: Queryable;
  logger: Logger;
  workerId: string;
  /** The role the pool's connections run as. */
  role: string;
}

export interface Worker {
  /** Resolves once the worker is taking work. */
  start(): Promise<void>;
  /** Stops taking work and waits for the work in hand. Idempotent. */
  stop(): Promise<void>;
}

/**
 * The job-running process. So far it proves its database access; pg-boss job handling
 * (durable steps, leases, cancellation) plugs in behind start()/stop().
 */
export function createWorker(deps: WorkerDeps): Worker {
  let stopped: Promise<void> | undefined;
  return {
    async start() {
      await checkDatabase(deps.db, deps.role);
      deps.logger.info('worker started', { workerId: deps.workerId });
    },
    stop() {
      stopped ??= (async () => {
        deps.logger.info('worker stopped', { workerId: deps.workerId });
      })();
      return stopped;
    },
  };
}
