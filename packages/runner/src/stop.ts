/** Why a run stops before its tool finished. */
/**
 * `lease_lost`: the database says another worker holds the lease. `lease_expired`: the local
 * lease deadline passed without a renewal (PostgreSQL unreachable): the lease may or may not
 * have been taken over, so the job is given back to pg-boss rather than completed.
 */
export type StopReason =
  | 'cancel'
  | 'deadline'
  | 'lease_lost'
  | 'lease_expired'
  | 'shutdown'
  | 'revoked'
  | 'paused'
  // Parked on a question (ctx.ask): the transition was written; the job is done.
  | 'awaiting_input';

/** Thrown at a boundary (or from an aborted wait) to unwind the tool's code. */
export class StopRun extends Error {
  readonly reason: StopReason;
  constructor(reason: StopReason) {
    super(`run stopped: ${reason}`);
    this.name = 'StopRun';
    this.reason = reason;
  }
}

export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
