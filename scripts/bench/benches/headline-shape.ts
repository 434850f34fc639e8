// The headline's shape, shared by the benches that run it or a peer beside it (tasks.ts,
// peer.ts, idle.ts): the tool, its steps, the load's connections and ramps.

/** The headline tool: bulk_update_records of 1,000 records = 2 steps (batches of 500). */
export const STEP_MS = 100;
export const STEPS = 2;
export const WORKERS_ENV = { DEMO_STEP_MS: String(STEP_MS) };
export const START_CONNECTIONS = 20;
export const POLL_CONNECTIONS = 50;
/**
 * A headline's load runs this much longer than its window at each end: the window sees the
 * steady state (no start-up of the load processes, no tail of tasks still running).
 */
export const RAMP_S = 2.5;

/**
 * The rate a headline sustains: its starts when completions kept up (the tasks open, queued
 * or running, grew over the window by less than a tenth of a second's starts, i.e. noise),
 * else its completions (the queue grew).
 */
export function sustainedRate(starts: number, completions: number, growth: number) {
  const keptUp = growth <= Math.max(5, starts * 0.1);
  return { keptUp, rate: keptUp ? starts : completions };
}
