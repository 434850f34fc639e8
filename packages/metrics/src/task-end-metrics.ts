import { Histogram, type Registry } from 'prom-client';

const DURATION_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];
const PICKUP_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** The columns of a just-ended task row that the metrics read. */
export interface EndedTask {
  tool: string;
  status: string;
  outcome: string | null;
  created_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
}

/**
 * Task durations and pickup latency, observed by whichever process ended the task: a worker
 * (the run settled it, or its deadline sweep did) or a gateway (cancel or revocation of a
 * task no live worker held). Each task ends exactly once (settleTask), so it is observed
 * once across the cluster; sum the series over `service` for the whole picture.
 */
export function createTaskEndMetrics(registry: Registry) {
  const taskDuration = new Histogram({
    name: 'mtg_task_duration_seconds',
    help: 'From creation to the end of a task, observed by the process that ended it, by tool and outcome',
    labelNames: ['tool', 'status', 'outcome'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const pickupLatency = new Histogram({
    name: 'mtg_task_pickup_seconds',
    help: 'From creation to the first start of a task that ended (created_at → started_at), observed with its duration',
    labelNames: ['tool'],
    buckets: PICKUP_BUCKETS,
    registers: [registry],
  });
  return {
    taskDuration,
    pickupLatency,
    /** Call once, after the transaction that ended `task` committed. */
    taskEnded(task: EndedTask): void {
      if (!task.ended_at) return;
      const created = task.created_at.getTime();
      taskDuration.observe(
        { tool: task.tool, status: task.status, outcome: task.outcome ?? 'none' },
        (task.ended_at.getTime() - created) / 1000,
      );
      if (task.started_at)
        pickupLatency.observe(
          { tool: task.tool },
          Math.max(0, task.started_at.getTime() - created) / 1000,
        );
    },
  };
}

export type TaskEndMetrics = ReturnType<typeof createTaskEndMetrics>;
