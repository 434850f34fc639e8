import {
  circuitBreaker,
  CircuitState,
  ConsecutiveBreaker,
  decorrelatedJitterGenerator,
  ExponentialBackoff,
  handleWhen,
  isBrokenCircuitError,
  isTaskCancelledError,
  retry,
  timeout,
  TimeoutStrategy,
  type CircuitBreakerPolicy,
} from 'cockatiel';

/**
 * Glossary
 * - attempt: one HTTP request to a downstream, bounded by `attemptTimeoutMs`.
 * - call: what a tool asks for (one read or write); up to 1 + `retries` attempts, with
 *   exponential backoff and jitter between them.
 * - circuit: one per downstream base URL, shared by every task of this worker process. It
 *   opens after `breakerThreshold` consecutive transient failures; while open, calls fail at
 *   once with `DownstreamUnavailable('circuit_open')`; after `breakerCooldownMs` one probe
 *   goes through (half-open) and its outcome closes or re-opens it.
 * - transient: a timeout, no connection, or HTTP 5xx / 408 / 429. Any other 4xx is the
 *   downstream refusing the request: it is neither retried nor counted against the circuit.
 */
export interface DownstreamResilienceOptions {
  attemptTimeoutMs: number;
  /** Retries after the first attempt of a call (0: none). */
  retries: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
  /** For the jitter of `retryAfterMs`; tests may fix it. */
  random?: () => number;
}

export type CircuitStateName = 'closed' | 'open' | 'half_open' | 'isolated';

/** Stable reason codes of an unavailable downstream. */
export type UnavailableCode = 'circuit_open' | 'timeout' | 'unreachable' | 'server_error';

/**
 * A downstream could not be used right now, after this call's own retries: an outage, not a
 * refusal. The runner does not fail the task for it; it waits `retryAfterMs` (saying so in
 * the task's status message) and resumes from the journal, bounded by the task's deadline.
 */
export class DownstreamUnavailable extends Error {
  readonly code: UnavailableCode;
  readonly downstream: string;
  readonly retryAfterMs: number;
  constructor(
    code: UnavailableCode,
    downstream: string,
    retryAfterMs: number,
    detail: string,
    cause?: unknown,
  ) {
    super(
      `downstream ${downstream} unavailable (${describeUnavailable(code)}): ${detail}`,
      cause === undefined ? {} : { cause },
    );
    this.name = 'DownstreamUnavailable';
    this.code = code;
    this.downstream = downstream;
    this.retryAfterMs = retryAfterMs;
  }
}

const UNAVAILABLE_CODES: ReadonlySet<unknown> = new Set<UnavailableCode>([
  'circuit_open',
  'timeout',
  'unreachable',
  'server_error',
]);

/**
 * By its stable code (not `instanceof`, so a copy of this module loaded twice still
 * classifies its errors; not its name or message).
 */
export function isDownstreamUnavailable(error: unknown): error is DownstreamUnavailable {
  const e = error as { code?: unknown; downstream?: unknown; retryAfterMs?: unknown } | null;
  return (
    UNAVAILABLE_CODES.has(e?.code) &&
    typeof e?.downstream === 'string' &&
    typeof e.retryAfterMs === 'number'
  );
}

export function describeUnavailable(code: UnavailableCode): string {
  switch (code) {
    case 'circuit_open':
      return 'circuit open';
    case 'timeout':
      return 'timed out';
    case 'unreachable':
      return 'unreachable';
    case 'server_error':
      return 'server error';
  }
}

/** No HTTP answer at all (connection refused or reset, DNS): transient. */
export class DownstreamUnreachable extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'DownstreamUnreachable';
  }
}

class AttemptTimedOut extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = 'AttemptTimedOut';
  }
}

/** HTTP statuses worth another attempt: the server's trouble, a timeout or a rate limit. */
export function isTransientStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

function isTransient(error: unknown): boolean {
  if (error instanceof AttemptTimedOut || error instanceof DownstreamUnreachable) return true;
  // A DownstreamError (targets/target-client.ts), by its code.
  const e = error as { code?: unknown; status?: unknown } | null;
  return (
    e?.code === 'downstream_refused' && typeof e.status === 'number' && isTransientStatus(e.status)
  );
}

export interface DownstreamResilience {
  /**
   * Runs one call through the downstream's policies. `attempt` gets a signal that aborts on
   * the per-attempt timeout or when `signal` aborts. When `signal` aborts the call rejects at
   * once with its reason — also while waiting between attempts — and no further attempt
   * starts.
   */
  run<T>(
    downstream: string,
    signal: AbortSignal,
    attempt: (signal: AbortSignal) => Promise<T>,
  ): Promise<T>;
  /** The circuits this process has used, for metrics. */
  circuits(): Array<{ downstream: string; state: CircuitStateName }>;
  /** Called on every circuit state change; returns an unsubscribe function. */
  onStateChange(listener: (downstream: string, state: CircuitStateName) => void): () => void;
}

const STATE_NAMES: Record<CircuitState, CircuitStateName> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half_open',
  [CircuitState.Isolated]: 'isolated',
};

/** Timeouts, retries and circuit breakers for downstream calls (cockatiel), per process. */
export function createDownstreamResilience(
  options: DownstreamResilienceOptions,
): DownstreamResilience {
  const random = options.random ?? Math.random;
  const transient = handleWhen(isTransient);
  const circuits = new Map<string, { breaker: CircuitBreakerPolicy; openedAt: number }>();
  const listeners = new Set<(downstream: string, state: CircuitStateName) => void>();
  const perAttempt = timeout(options.attemptTimeoutMs, TimeoutStrategy.Aggressive);
  const retrying = retry(transient, {
    maxAttempts: options.retries,
    backoff: new ExponentialBackoff({
      generator: decorrelatedJitterGenerator,
      initialDelay: options.backoffInitialMs,
      maxDelay: options.backoffMaxMs,
    }),
  });

  const circuitFor = (downstream: string) => {
    let c = circuits.get(downstream);
    if (!c) {
      const breaker = circuitBreaker(transient, {
        halfOpenAfter: options.breakerCooldownMs,
        breaker: new ConsecutiveBreaker(options.breakerThreshold),
      });
      const entry = { breaker, openedAt: 0 };
      breaker.onBreak(() => {
        entry.openedAt = performance.now();
      });
      breaker.onStateChange((state) => {
        for (const l of listeners) l(downstream, STATE_NAMES[state]);
      });
      circuits.set(downstream, entry);
      c = entry;
    }
    return c;
  };

  /** How long a task should wait before trying again: the rest of the cool-down, jittered. */
  const retryAfter = (c: { breaker: CircuitBreakerPolicy; openedAt: number }) => {
    const open = c.breaker.state === CircuitState.Open;
    const base = open
      ? Math.max(0, c.openedAt + options.breakerCooldownMs - performance.now())
      : options.backoffMaxMs;
    // Spread the waiting tasks so the half-open probe is not a stampede.
    return Math.max(
      50,
      Math.round(base + random() * Math.min(1000, options.breakerCooldownMs / 2)),
    );
  };

  return {
    async run(downstream, signal, attempt) {
      if (signal.aborted) throw signal.reason;
      const c = circuitFor(downstream);
      const once = async () => {
        // A retry that wakes up after the caller gave up sends nothing.
        if (signal.aborted) throw signal.reason;
        return c.breaker.execute(async () => {
          try {
            return await perAttempt.execute(
              ({ signal: attemptSignal }) => attempt(attemptSignal),
              signal,
            );
          } catch (error) {
            // The caller's abort is not the downstream's failure: never retried or counted.
            if (signal.aborted) throw signal.reason;
            if (isTaskCancelledError(error)) throw new AttemptTimedOut(options.attemptTimeoutMs);
            throw error;
          }
        }, signal);
      };
      try {
        // cockatiel's wait between attempts does not listen to the signal: race it.
        return await untilAborted(retrying.execute(once, signal), signal);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        if (isBrokenCircuitError(error)) {
          throw new DownstreamUnavailable(
            'circuit_open',
            downstream,
            retryAfter(c),
            'calls are held back until it recovers',
            error,
          );
        }
        if (error instanceof AttemptTimedOut) {
          throw new DownstreamUnavailable(
            'timeout',
            downstream,
            retryAfter(c),
            error.message,
            error,
          );
        }
        if (error instanceof DownstreamUnreachable) {
          throw new DownstreamUnavailable(
            'unreachable',
            downstream,
            retryAfter(c),
            error.message,
            error,
          );
        }
        if (isTransient(error)) {
          throw new DownstreamUnavailable(
            'server_error',
            downstream,
            retryAfter(c),
            (error as Error).message,
            error,
          );
        }
        throw error;
      }
    },
    circuits() {
      return [...circuits].map(([downstream, c]) => ({
        downstream,
        state: STATE_NAMES[c.breaker.state],
      }));
    },
    onStateChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
