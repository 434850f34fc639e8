/**
 * The clock a test stack's gateway and workers read instead of the system's: real time plus
 * an offset the test moves forward, so an expiry or a purge cadence passes without sleeping.
 * Times stored in rows are the database's now(): to age a row, move its timestamps (see
 * docs/architecture.md, "Time").
 */
export interface TestClock {
  (): Date;
  /** Moves the processes' time forward by `ms`. */
  advance(ms: number): void;
  /** Back to real time. */
  reset(): void;
}

export function testClock(): TestClock {
  let offsetMs = 0;
  const clock = (() => new Date(Date.now() + offsetMs)) as TestClock;
  clock.advance = (ms) => {
    offsetMs += ms;
  };
  clock.reset = () => {
    offsetMs = 0;
  };
  return clock;
}
