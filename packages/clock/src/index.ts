export { nowMs, systemClock, type Clock } from './clock.ts';
