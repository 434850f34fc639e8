import { createRegistry, EVENT_LOOP_SAMPLE_MS } from '../src/create-registry.ts';

// The event-loop lag series sample the loop every EVENT_LOOP_SAMPLE_MS, not prom-client's
// 10 ms, which woke an idle process 100 times a second. A sample is the interval between two
// of the sampler's timers, lag included: so the shortest one seen is about the sampling
// interval or longer, whatever the machine's speed.
test('the event-loop lag series sample the loop every EVENT_LOOP_SAMPLE_MS, not every 10 ms', async () => {
  const registry = createRegistry('test');
  // The lag series are set when the registry is collected, from the samples since the last
  // collection; with none yet the minimum reads the empty histogram's (int64's largest).
  const shortest = async () =>
    (await registry.getMetricsAsJSON()).find(
      (m) => m.name === 'mtg_nodejs_eventloop_lag_min_seconds',
    )?.values[0]?.value;
  let seconds: number | undefined;
  for (let i = 0; i < 40 && !(seconds !== undefined && seconds < 60); i++) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    seconds = await shortest();
  }
  expect(seconds).toBeLessThan(60);
  // libuv's loop clock counts whole milliseconds, so a sample may read a little short (9.2 ms
  // at 10 ms); half the interval tells the two apart with room to spare.
  expect(seconds!).toBeGreaterThanOrEqual(EVENT_LOOP_SAMPLE_MS / 2 / 1000);
  registry.clear();
});
