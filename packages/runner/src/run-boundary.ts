import {
  readBoundary,
  renewLease,
  type Boundary,
  type Lease,
  type PendingProgress,
} from '@mtg/tasks';
import type { RunDeps } from './run-task.ts';
import { deferredSteps, type DeferredStep } from './deferred-steps.ts';
import { StopRun, type StopReason } from './stop.ts';

/**
 * One run's boundary: its abort signal (aborted from outside — cancel, deadline, revocation,
 * shutdown — or by a boundary check), the check itself (renews the lease and reads cancel,
 * deadline and revocation in one statement), the renewal timer between checks, and the steps
 * in flight, which every outcome waits for.
 */
export interface RunBoundary {
  signal: AbortSignal;
  /**
   * Checks, renewing the lease (and writing the progress report waiting, if any) when a third
   * of it has passed since the last renewal or when `renew` says so, reading the boundary
   * otherwise; throws StopRun when the run must stop. `atStepBoundary`: a graceful shutdown
   * (drain) stops the run only between steps, so the step in flight finishes and is
   * journaled; every other stop reason applies anywhere.
   */
  check(atStepBoundary?: boolean, reuseFresh?: boolean, renew?: boolean): Promise<void>;
  /**
   * The run's end, before a completion whose statement reads the rest of the boundary itself
   * (completeTask `atBoundary`): the local lease deadline, the steps waiting (written first)
   * and a stop already known; reads nothing. Throws StopRun when the run must stop.
   */
  checkKnown(): Promise<void>;
  /**
   * A boundary read by another statement of the run (the claim, a step's journal). A check
   * with `reuseFresh` within BOUNDARY_FRESH_MS of it decides on it instead of reading again.
   */
  observe(boundary: Boundary): void;
  /**
   * The tool's progress: written with the next step's journal, a renewal or the run's ending,
   * whichever comes first, and within PROGRESS_FLUSH_MS in any case.
   */
  reportProgress(progress: PendingProgress): void;
  /**
   * The progress report still waiting to be written, handed to the caller to write (the
   * run's ending carries it); nothing waits after this.
   */
  takeProgress(): PendingProgress | undefined;
  /**
   * A step the tool finished, to be journaled by the run's next statement: the next check
   * writes it first (the next step, a call to a target or upstream, a question), the run's
   * completion carries it (takeStep), and once the run's code yields to the event loop with
   * it still waiting it is written on its own. Until then it is written nowhere: a worker
   * that dies in between runs the step again, as one that dies during its journal write did.
   */
  deferStep(step: DeferredStep): void;
  /** The one step waiting to be journaled, handed to the caller to write (DeferredSteps.take). */
  takeStep(): DeferredStep | undefined;
  /** Writes the steps waiting, if any (and waits for a write in flight). */
  flushStep(): Promise<void>;
  /** The last boundary read (for a stop whose reason came by notification). */
  readonly last: Boundary | undefined;
  /** Counts a step as in flight until it settles. */
  track<T>(step: Promise<T>): Promise<T>;
  /** Resolves when no step is in flight. */
  quiesce(): Promise<void>;
  /** Why the run stopped, for an error thrown by the tool or a boundary; undefined: it did not. */
  stopReason(error: unknown): StopReason | undefined;
  close(): void;
}

/**
 * How long a progress report may wait for a boundary check to carry it: a step's target call
 * (its boundary check) usually comes sooner.
 */
export const PROGRESS_FLUSH_MS = 250;

/**
 * A boundary read this recently (by the claim, a step's journal or a check) stands for the
 * next step's start and for the run's end: nothing but the tool's own code ran in between.
 * Every call to a target or upstream still reads the boundary itself, and a cancel, deadline
 * or revocation notification aborts the run at once either way.
 */
export const BOUNDARY_FRESH_MS = 25;

/**
 * The part of a lease a worker does not use: it stops this long before its lease could have
 * run out by its own clock, for the drift between its clock and the database's over one lease
 * and for a request already on the wire to land (a tenth of the lease, at least 200 ms).
 */
export const leaseMarginMs = (leaseMs: number) => Math.max(200, Math.floor(leaseMs / 10));

export function openRunBoundary(
  deps: Pick<RunDeps, 'pool' | 'leaseMs' | 'drain'>,
  taskId: string,
  lease: Lease,
  stop: AbortSignal,
  /**
   * performance.now() when the claim that took the lease was sent: the database set the
   * lease's expiry at or after that instant, so the lease holds at least until it + leaseMs.
   */
  claimSentAt: number = performance.now(),
): RunBoundary {
  const run = new AbortController();
  const onStop = () => run.abort(stop.reason ?? new StopRun('shutdown'));
  stop.addEventListener('abort', onStop, { once: true });
  if (stop.aborted) onStop();
  const inflight = new Set<Promise<unknown>>();
  let last: Boundary | undefined;
  let lastAt = -Infinity;
  let progress: PendingProgress | undefined;
  let flush: NodeJS.Timeout | undefined;

  // The local lease deadline. A worker cut off from PostgreSQL cannot learn that its lease
  // expired and another worker took the task over; all it knows is when its last renewal was
  // sent. So the run stops (its signal aborts, cutting a target call in flight, and no call
  // starts) before the last moment its lease was known to be valid: at no instant do two
  // workers write for one task. A renewal that succeeds moves the deadline on.
  let validUntil = claimSentAt + deps.leaseMs - leaseMarginMs(deps.leaseMs);
  let expiry: NodeJS.Timeout | undefined;
  const leaseExpired = () => performance.now() >= validUntil;
  const armExpiry = () => {
    clearTimeout(expiry);
    expiry = setTimeout(
      () => {
        if (leaseExpired()) run.abort(new StopRun('lease_expired'));
        else armExpiry();
      },
      Math.max(0, validUntil - performance.now()),
    );
    expiry.unref();
  };
  armExpiry();

  const record = (b: Boundary) => {
    last = b;
    lastAt = performance.now();
  };
  const decide = (b: Boundary, atStepBoundary: boolean) => {
    const reason =
      boundaryStop(b) ?? (atStepBoundary && deps.drain?.aborted ? 'shutdown' : undefined);
    if (reason) run.abort(new StopRun(reason));
    if (run.signal.aborted) throw toStop(run.signal.reason);
  };
  // A renewal that hangs (PostgreSQL black-holed) must not hold the run past its deadline.
  const untilStopped = <T>(p: Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (run.signal.aborted) return reject(toStop(run.signal.reason));
      const onAbort = () => reject(toStop(run.signal.reason));
      run.signal.addEventListener('abort', onAbort, { once: true });
      p.then(resolve, reject).finally(() => run.signal.removeEventListener('abort', onAbort));
    });
  // The step's journal returns the boundary as it stands: recorded as a check's would be.
  const writeStep = async (d: DeferredStep) => {
    const carried = progress;
    progress = undefined;
    clearTimeout(flush);
    let b: Boundary;
    try {
      b = await d.write(carried);
    } catch (error) {
      progress ??= carried;
      throw error;
    }
    if (!b.mine) {
      run.abort(new StopRun('lease_lost'));
      throw new StopRun('lease_lost');
    }
    record(b);
    const reason = boundaryStop(b);
    if (reason) run.abort(new StopRun(reason));
  };
  const steps = deferredSteps(writeStep);
  // The lease is renewed every third of it (the timer below); a check in between that has no
  // progress to write reads the boundary instead, writing nothing.
  const renewEveryMs = Math.max(250, Math.floor(deps.leaseMs / 3));
  let renewedAt = claimSentAt;
  const check = async (
    atStepBoundary = false,
    reuseFresh = false,
    renew = false,
  ): Promise<void> => {
    if (leaseExpired()) run.abort(new StopRun('lease_expired'));
    await steps.flush();
    if (reuseFresh && last && performance.now() - lastAt < BOUNDARY_FRESH_MS) {
      return decide(last, atStepBoundary);
    }
    let b: Boundary;
    const sentAt = performance.now();
    const renewing = renew || sentAt - renewedAt >= renewEveryMs;
    // A renewal writes the row anyway: it carries the progress report waiting to be written.
    const carried = renewing ? progress : undefined;
    if (renewing) {
      progress = undefined;
      clearTimeout(flush);
    }
    try {
      b = await untilStopped(
        renewing
          ? renewLease(deps.pool, taskId, lease, deps.leaseMs, carried)
          : readBoundary(deps.pool, taskId, lease),
      );
    } catch (error) {
      progress ??= carried; // not written: the next check carries it
      throw error;
    }
    if (renewing && b.mine && !run.signal.aborted) {
      renewedAt = Math.max(renewedAt, sentAt);
      validUntil = Math.max(validUntil, sentAt + deps.leaseMs - leaseMarginMs(deps.leaseMs));
    }
    record(b);
    decide(b, atStepBoundary);
  };
  const renewer = setInterval(() => {
    check(false, false, true).catch(() => {});
  }, renewEveryMs);
  renewer.unref();

  return {
    signal: run.signal,
    check,
    async checkKnown() {
      if (leaseExpired()) run.abort(new StopRun('lease_expired'));
      await steps.flush();
      if (run.signal.aborted) throw toStop(run.signal.reason);
    },
    observe(b) {
      // The claim or a journal write read it; its send time is not known here, so it does
      // not move the deadline (only renewals, whose send time is, do).
      record(b);
      const reason = boundaryStop(b);
      if (reason) run.abort(new StopRun(reason));
    },
    reportProgress(p) {
      progress = p;
      clearTimeout(flush);
      flush = setTimeout(() => {
        if (progress) check(false, false, true).catch(() => {});
      }, PROGRESS_FLUSH_MS);
      flush.unref();
    },
    takeProgress() {
      const taken = progress;
      progress = undefined;
      clearTimeout(flush);
      return taken;
    },
    deferStep: (d) => steps.defer(d),
    takeStep: () => steps.take(),
    flushStep: () => steps.flush(),
    get last() {
      return last;
    },
    track(step) {
      inflight.add(step);
      step.then(
        () => inflight.delete(step),
        () => inflight.delete(step),
      );
      return step;
    },
    async quiesce() {
      await Promise.allSettled([...inflight]);
    },
    stopReason(error) {
      if (error instanceof StopRun) return error.reason;
      return run.signal.aborted ? toStop(run.signal.reason).reason : undefined;
    },
    close() {
      steps.close();
      clearInterval(renewer);
      clearTimeout(expiry);
      clearTimeout(flush);
      stop.removeEventListener('abort', onStop);
    },
  };
}

function boundaryStop(b: Boundary): StopReason | undefined {
  if (!b.mine) return 'lease_lost';
  if (b.revoked) return 'revoked';
  if (b.cancelRequested) return b.cancelRequestedBy?.path === 'revocation' ? 'revoked' : 'cancel';
  if (b.pastDeadline) return 'deadline';
  return undefined;
}

/** The StopRun an abort carries; any other abort reason is a shutdown. */
export function toStop(reason: unknown): StopRun {
  return reason instanceof StopRun ? reason : new StopRun('shutdown');
}
