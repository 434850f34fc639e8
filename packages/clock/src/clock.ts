/**
 * The one way the product reads the time of day: every process decision that compares a time
 * (a token's expiry, a rate-limit window, a breaker's cooldown, a wait's deadline, the pace of
 * the purge) takes a Clock, and the apps hand one down from where they are built. Tests give
 * the gateway and workers a clock they move forward instead of sleeping. Stored times are the
 * database's `now()`, not this (docs/architecture.md, "Time"); elapsed durations for logs and
 * metrics are `performance.now()`, which no clock move should bend.
 */
export type Clock = () => Date;

/** The system's time: the default wherever a clock is optional. */
export const systemClock: Clock = () => new Date();

/** The clock's time in epoch milliseconds (what a `Date.now()` would have read). */
export function nowMs(clock: Clock = systemClock): number {
  return clock().getTime();
}
