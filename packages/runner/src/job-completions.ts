import type { Job, PgBoss } from 'pg-boss';

/** Most jobs one statement completes; more wait for the next. */
const MAX_BATCH = 256;

interface Pending {
  job: Job<unknown>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Completes the jobs of runs that ended other than by a completion (which completes its job
 * in the statement that ends the task, JobEnd), several in one statement: while one completion is
 * on its way, the jobs whose runs end meanwhile queue, and the next statement completes all
 * of one queue's (fenced to each job's attempt, as pg-boss completes one). A lone job is
 * completed at once: nothing waits on a timer. Each caller's promise settles with its
 * statement.
 *
 * The task has already ended in its own statement when its job is completed here. A job left
 * active by a crash in between is handed out again once it expires; its claim finds the task
 * ended (`gone`) and the job is completed then.
 */
export function createJobCompletions(
  boss: Pick<PgBoss, 'complete'>,
): (job: Job<unknown>) => Promise<void> {
  const queue: Pending[] = [];
  let flushing = false;

  async function flush(): Promise<void> {
    flushing = true;
    try {
      while (queue.length > 0) {
        const name = queue[0]!.job.name;
        const batch = queue.filter((p) => p.job.name === name).slice(0, MAX_BATCH);
        for (const p of batch) queue.splice(queue.indexOf(p), 1);
        try {
          await boss.complete(
            name,
            batch.map((p) => p.job),
          );
          for (const p of batch) p.resolve();
        } catch (error) {
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      flushing = false;
    }
  }

  return (job) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ job, resolve, reject });
      if (!flushing) void flush();
    });
}
