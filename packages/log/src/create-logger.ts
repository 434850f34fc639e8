import winston from 'winston';
import { redact } from './redact.ts';

export type Logger = winston.Logger;

const redactFormat = winston.format((info) => {
  const clean = redact({ ...info }) as Record<string, unknown>;
  for (const k of Object.keys(clean)) (info as Record<string, unknown>)[k] = clean[k];
  return info;
});

/** A JSON-lines logger for one process; every line names the service. */
export function createLogger(
  service: string,
  options: { level?: string; silent?: boolean } = {},
): Logger {
  return winston.createLogger({
    level: options.level ?? 'info',
    silent: options.silent ?? false,
    defaultMeta: { service },
    format: winston.format.combine(
      redactFormat(),
      winston.format.timestamp(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Console()],
  });
}
