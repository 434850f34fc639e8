export { nowMs, systemClock, type Clock } from './clock.ts';
export { rememberAccepted, type RememberOptions } from './remember-accepted.ts';
