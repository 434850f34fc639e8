export { clipEveryField } from './clip-every-field.ts';
export { clipInput, MAX_ECHOED_CHARS } from './clip-input.ts';
export { createLogger, type Logger } from './create-logger.ts';
