import type { ExchangeMetrics, TargetCallMetrics } from './operations-metrics.ts';

/**
 * The same exchanger, observed: each exchange's latency by outcome (ok, refused by the IdP,
 * error: an outage), and each failure by its OAuth error (or `unavailable`).
 */
export function instrumentExchanger<
  R,
  O extends { ok: true } | { ok: false; error: string },
  E extends { exchange(request: R): Promise<O> },
>(exchanger: E, metrics: ExchangeMetrics): E {
  return {
    ...exchanger,
    async exchange(request: R): Promise<O> {
      const end = metrics.duration.startTimer();
      try {
        const outcome = await exchanger.exchange(request);
        end({ outcome: outcome.ok ? 'ok' : 'refused' });
        if (!outcome.ok) metrics.failures.inc({ error: outcome.error.slice(0, 64) });
        return outcome;
      } catch (error) {
        end({ outcome: 'error' });
        metrics.failures.inc({ error: 'unavailable' });
        throw error;
      }
    },
  };
}

/** A fetch for one target's client that counts each attempt by status class and times it. */
export function instrumentFetch(
  fetchFn: typeof fetch,
  metrics: TargetCallMetrics,
  target: string,
): typeof fetch {
  return async (input, init) => {
    const method = (init?.method ?? 'GET').toUpperCase();
    const end = metrics.duration.startTimer({ target, method });
    try {
      const response = await fetchFn(input, init);
      metrics.requests.inc({ target, method, outcome: `${Math.floor(response.status / 100)}xx` });
      return response;
    } catch (error) {
      const outcome = init?.signal?.aborted ? 'aborted' : 'error';
      metrics.requests.inc({ target, method, outcome });
      throw error;
    } finally {
      end();
    }
  };
}
