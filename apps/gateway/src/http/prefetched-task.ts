import { AsyncLocalStorage } from 'node:async_hooks';
import type { Principal } from '@mtg/identity';
import type { OwnedTaskRow, PrefetchedTask } from '@mtg/tasks';

/** A poll's task row, read beside its revocation check, for the request's read verb. */
interface Prefetch {
  taskId: string;
  principal: Principal;
  row: OwnedTaskRow | undefined;
}

const requests = new AsyncLocalStorage<Prefetch>();

/**
 * Runs the rest of the request (`next`) with the task row its poll read in the revocation
 * check's statement (reject-revoked.ts), for the task service to take (takePrefetchedTask).
 */
export function withPrefetchedTask(prefetch: Prefetch, next: () => void): void {
  requests.run(prefetch, next);
}

/**
 * The task service's `prefetched`: the row read for this request, if it is of this task and
 * this caller, once — a second read of the same task in the same request (a result wait
 * that polls again) reads afresh.
 */
export const takePrefetchedTask: PrefetchedTask = (taskId, p) => {
  const prefetch = requests.getStore();
  if (!prefetch?.row || prefetch.taskId !== taskId) return undefined;
  const q = prefetch.principal;
  if (q.tenant !== p.tenant || q.subject !== p.subject || q.client !== p.client) return undefined;
  const row = prefetch.row;
  prefetch.row = undefined;
  return row;
};
