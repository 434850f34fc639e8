// What seed-volume.ts writes for task i: the same formulas as its SQL for the task rows
// (ids, tenants, owners, times), and the lifecycle events such a task leaves in the trail.
import { createHash } from 'node:crypto';

export interface VolumePlan {
  tasks: number;
  eventsPerTask: number;
  tenants: number;
  /** The history's last task starts here (epoch ms). */
  endMs: number;
  spanMs: number;
  /** The oldest this many tasks are past their retention (a purge removes them). */
  expired: number;
}

export interface VolumeTask {
  index: number;
  id: string;
  tenantIndex: number;
  tenant: string;
  subject: string;
  client: string;
  createdMs: number;
  end: 'task.completed' | 'task.failed' | 'task.cancelled';
}

export interface VolumeEvent {
  type: string;
  occurredAt: string;
  body: {
    taskId: string;
    tenant: string;
    subject: string;
    client: string;
    tool: string;
    correlationId: string;
    reason?: string;
    actor?: { subject: string; kind: 'worker' | 'user' };
    data?: Record<string, unknown>;
  };
}

export function volumeTask(plan: VolumePlan, i: number): VolumeTask {
  const tenantIndex = i % plan.tenants;
  return {
    index: i,
    id: createHash('md5').update(`vol-task-${i}`).digest('hex'),
    tenantIndex,
    tenant: `vol-${String(tenantIndex).padStart(3, '0')}`,
    subject: `vol-user-${i % (plan.tenants * 50)}`,
    client: `vol-client-${i % 3}`,
    createdMs: Math.floor(plan.endMs - plan.spanMs + i * (plan.spanMs / plan.tasks)),
    end: i % 50 === 0 ? 'task.failed' : i % 50 === 1 ? 'task.cancelled' : 'task.completed',
  };
}

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ`, as the chain hashes it. */
function canonicalMs(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/**
 * A 2-step task's trail, as the bench's headline tool leaves it: created, delegated, started,
 * two steps, its end, then reads by the owner; beyond nine, more status reads. Each event a
 * few ms after the one before, so a task's events stay well inside the gap to the next task
 * of its tenant.
 */
export function volumeEvents(plan: VolumePlan, t: VolumeTask): VolumeEvent[] {
  const types = [
    'task.created',
    'task.delegated',
    'task.started',
    'task.step_completed',
    'task.step_completed',
    'task.identity_refreshed',
    t.end,
    'task.status_read',
    'task.result_read',
  ];
  while (types.length < plan.eventsPerTask) types.splice(7, 0, 'task.status_read');
  types.length = plan.eventsPerTask;
  const who = { taskId: t.id, tenant: t.tenant, subject: t.subject, client: t.client };
  return types.map((type, k) => ({
    type,
    occurredAt: canonicalMs(t.createdMs + k * 3),
    body: {
      ...who,
      tool: 'bulk_update_records',
      correlationId: `vol-corr-${t.index}`,
      ...(type === 'task.failed' ? { reason: 'tool_error' } : {}),
      ...(type === 'task.started' || type.startsWith('task.step')
        ? { actor: { subject: 'vol-worker', kind: 'worker' as const } }
        : {}),
      ...(type === 'task.step_completed' ? { data: { step: `batch-${k - 2}` } } : {}),
    },
  }));
}
