import {
  BrokenCircuitError,
  circuitBreaker,
  CircuitState,
  ConsecutiveBreaker,
  handleWhen,
} from 'cockatiel';
import { isUpstreamError, UpstreamError } from './upstream-error.ts';

/**
 * Protection of one upstream, shared by everything one process sends it: a cap on requests
 * in flight (the rest wait their turn, abortably) and a circuit breaker that opens after
 * `breakerThreshold` consecutive transient failures and lets one probe through after
 * `breakerCooldownMs`. Refusals (4xx, JSON-RPC errors) are the upstream answering: they
 * neither count against the circuit nor are retried.
 */
export interface UpstreamGuard {
  run<T>(signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T>;
  state(): 'closed' | 'open' | 'half_open' | 'isolated';
  /** How long a waiting task should sleep before trying again. */
  retryAfterMs(): number;
  inFlight(): number;
  /** Calls run through this guard so far, by how they ended (for the per-upstream metric). */
  outcomes(): ReadonlyMap<UpstreamCallOutcome, number>;
}

/**
 * How a call ended: `ok`; `refused` (the upstream answered with an error of its own: 4xx, a
 * JSON-RPC error); `failed` (transient: no answer, timeout, 5xx, malformed); `circuit_open`
 * (not sent); `aborted` (the caller gave up).
 */
export type UpstreamCallOutcome = 'ok' | 'refused' | 'failed' | 'circuit_open' | 'aborted';

export function createUpstreamGuard(options: {
  upstream: string;
  maxConcurrency: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
  random?: () => number;
}): UpstreamGuard {
  const random = options.random ?? Math.random;
  const breaker = circuitBreaker(
    handleWhen((e) => isUpstreamError(e) && e.transient),
    {
      halfOpenAfter: options.breakerCooldownMs,
      breaker: new ConsecutiveBreaker(options.breakerThreshold),
    },
  );
  let openedAt = 0;
  breaker.onBreak(() => {
    openedAt = performance.now();
  });
  let active = 0;
  const waiting: Array<() => void> = [];
  const acquire = async (signal: AbortSignal | undefined) => {
    if (active < options.maxConcurrency) {
      active++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener('abort', onAbort);
        active++;
        resolve();
      };
      const onAbort = () => {
        const i = waiting.indexOf(go);
        if (i >= 0) waiting.splice(i, 1);
        reject(signal!.reason);
      };
      waiting.push(go);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  };
  const release = () => {
    active--;
    waiting.shift()?.();
  };
  const names = {
    [CircuitState.Closed]: 'closed',
    [CircuitState.Open]: 'open',
    [CircuitState.HalfOpen]: 'half_open',
    [CircuitState.Isolated]: 'isolated',
  } as const;
  const outcomes = new Map<UpstreamCallOutcome, number>();
  const count = (o: UpstreamCallOutcome) => outcomes.set(o, (outcomes.get(o) ?? 0) + 1);
  return {
    outcomes: () => outcomes,
    state: () => names[breaker.state],
    inFlight: () => active,
    retryAfterMs() {
      const rest =
        breaker.state === CircuitState.Open
          ? Math.max(0, openedAt + options.breakerCooldownMs - performance.now())
          : options.breakerCooldownMs / 2;
      return Math.max(
        50,
        Math.round(rest + random() * Math.min(1000, options.breakerCooldownMs / 2)),
      );
    },
    async run(signal, work) {
      if (signal?.aborted) {
        count('aborted');
        throw signal.reason;
      }
      try {
        await acquire(signal);
      } catch (error) {
        count('aborted');
        throw error;
      }
      try {
        const result = await breaker.execute(() => work());
        count('ok');
        return result;
      } catch (error) {
        count(
          error instanceof BrokenCircuitError
            ? 'circuit_open'
            : signal?.aborted
              ? 'aborted'
              : isUpstreamError(error) && !error.transient
                ? 'refused'
                : 'failed',
        );
        if (error instanceof BrokenCircuitError) {
          throw new UpstreamError(
            'upstream_circuit_open',
            options.upstream,
            `upstream ${options.upstream} is failing; calls are refused for a while (circuit open)`,
          );
        }
        throw error;
      } finally {
        release();
      }
    },
  };
}
