import type { Pool } from 'pg';
import { appendAuditGrouped, type AuditEvent } from '@mtg/audit';
import { TASK_ID } from './task-id.ts';

/** A `task.denied` event as a verb writes it: who, which verb (`data.verb`), why. */
export type DenialEvent = AuditEvent & {
  type: 'task.denied';
  /** Unset for a system event (chain 0): a cross-tenant probe, for the system's operator. */
  tenant?: string;
  subject: string;
  client: string;
  reason: string;
  data: { verb: string } & Record<string, unknown>;
};

export interface DenialFold {
  /**
   * Writes the denial, or, when the same caller had the same denial (verb, reason, tool) in
   * the current window, only counts it. Resolves once a written event is committed.
   */
  deny(event: DenialEvent): Promise<void>;
}

export interface DenialFoldOptions {
  pool: Pool;
  /** How long one caller's repeats of one denial fold into one summary event. */
  windowMs: number;
  /** A summary event could not be written (it is written from a timer, not for a caller). */
  onSummaryFailed: (error: Error) => void;
  /**
   * Arms a window's close after `ms`; returns how to disarm it. Default: an unref'd timer. A
   * test passes its own, so a window closes when the test says, not when a busy machine's
   * clock happens to pass it.
   */
  schedule?: (close: () => void, ms: number) => () => void;
}

const timerSchedule = (close: () => void, ms: number) => {
  const timer = setTimeout(close, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

/** Task ids kept in a summary, so an auditor still sees what was probed. */
const SAMPLE_TASK_IDS = 10;
/** Open windows at most; past it every denial is written (never dropped). */
const MAX_OPEN_WINDOWS = 10_000;

interface Window {
  repeats: number;
  taskIds: Set<string>;
  first: DenialEvent;
}

/**
 * Folds repeated identical task denials for one caller: the first in each window is written
 * at once, as it always was; the repeats are counted and written as one `task.denied` summary
 * (`data.summary: true`, `data.count` = repeats after the first, a sample of their task ids)
 * when the window closes. A caller looping over random task ids then costs the audit chain
 * two events a window, not one per request; logs and metrics still see every denial. The
 * state is per process, as for token failures: each gateway replica folds on its own.
 */
export function createDenialFold(options: DenialFoldOptions): DenialFold {
  const open = new Map<string, Window>();

  const close = (key: string) => {
    const w = open.get(key);
    open.delete(key);
    if (!w || w.repeats === 0) return;
    const { taskId: _taskId, correlationId: _correlationId, data, ...who } = w.first;
    appendAuditGrouped(options.pool, {
      ...who,
      data: {
        verb: data.verb,
        ...(data.wire !== undefined ? { wire: data.wire } : {}),
        summary: true,
        count: w.repeats,
        windowMs: options.windowMs,
        ...(w.taskIds.size > 0 ? { taskIds: [...w.taskIds] } : {}),
      },
    }).catch((error: Error) => options.onSummaryFailed(error));
  };

  return {
    async deny(event) {
      const key = JSON.stringify([
        event.tenant,
        event.subject,
        event.client,
        event.data.verb,
        event.reason,
        event.tool ?? null,
        // A step-up denial is about one of the caller's own tasks, not a probe: each task
        // keeps its own record (repeats on the same task still fold).
        event.reason === 'scope_missing' ? (event.taskId ?? null) : null,
      ]);
      const w = open.get(key);
      if (w) {
        w.repeats++;
        if (event.taskId && TASK_ID.test(event.taskId) && w.taskIds.size < SAMPLE_TASK_IDS)
          w.taskIds.add(event.taskId);
        return;
      }
      if (open.size >= MAX_OPEN_WINDOWS) {
        await appendAuditGrouped(options.pool, event);
        return;
      }
      open.set(key, { repeats: 0, taskIds: new Set(), first: event });
      const disarm = (options.schedule ?? timerSchedule)(() => close(key), options.windowMs);
      try {
        await appendAuditGrouped(options.pool, event);
      } catch (error) {
        // Not written: the next such denial is a first again.
        disarm();
        open.delete(key);
        throw error;
      }
    },
  };
}
