import { createUpstreamGuard } from '../src/upstream-guard.ts';
import { UpstreamError } from '../src/upstream-error.ts';

const guard = () =>
  createUpstreamGuard({
    upstream: 'demo',
    maxConcurrency: 2,
    breakerThreshold: 2,
    breakerCooldownMs: 60_000,
    random: () => 0,
  });

test('at most maxConcurrency requests are in flight; the rest wait their turn', async () => {
  const g = guard();
  let peak = 0;
  const releases: Array<() => void> = [];
  const runs = Array.from({ length: 5 }, () =>
    g.run(undefined, async () => {
      peak = Math.max(peak, g.inFlight());
      await new Promise<void>((r) => releases.push(r));
    }),
  );
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 5));
    releases.shift()?.();
  }
  await Promise.all(runs);
  expect(peak).toBe(2);
});

test('consecutive transient failures open the circuit; refusals do not count', async () => {
  const g = guard();
  const refused = new UpstreamError('upstream_refused', 'demo', 'no');
  for (let i = 0; i < 3; i++)
    await expect(g.run(undefined, () => Promise.reject(refused))).rejects.toBe(refused);
  expect(g.state()).toBe('closed');
  const down = new UpstreamError('upstream_unreachable', 'demo', 'down');
  for (let i = 0; i < 2; i++)
    await expect(g.run(undefined, () => Promise.reject(down))).rejects.toBe(down);
  expect(g.state()).toBe('open');
  let called = false;
  await expect(
    g.run(undefined, async () => {
      called = true;
    }),
  ).rejects.toMatchObject({ code: 'upstream_circuit_open' });
  expect(called).toBe(false);
  expect(g.retryAfterMs()).toBeGreaterThan(50_000);
});

test('a waiter whose signal aborts leaves the queue with the signal reason', async () => {
  const g = createUpstreamGuard({
    upstream: 'd',
    maxConcurrency: 1,
    breakerThreshold: 5,
    breakerCooldownMs: 1000,
  });
  let release!: () => void;
  const first = g.run(undefined, () => new Promise<void>((r) => (release = r)));
  const stop = new AbortController();
  const second = g.run(stop.signal, async () => 'ran');
  stop.abort(new Error('stopped'));
  await expect(second).rejects.toThrow('stopped');
  release();
  await first;
  expect(g.inFlight()).toBe(0);
});
