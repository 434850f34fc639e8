export { createLogger, type Logger } from './create-logger.ts';
export { redact } from './redact.ts';
