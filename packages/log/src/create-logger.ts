import { trace } from '@opentelemetry/api';
import winston from 'winston';
import { redact } from './redact.ts';

export type Logger = winston.Logger;

const redactFormat = winston.format((info) => {
  const clean = redact({ ...info }) as Record<string, unknown>;
  for (const k of Object.keys(clean)) (info as Record<string, unknown>)[k] = clean[k];
  return info;
});

// With tracing on, a line written inside a span names it (trace_id, span_id); off, the API's
// no-op context has no span and nothing is added.
const traceFormat = winston.format((info) => {
  const sc = trace.getActiveSpan()?.spanContext();
  if (sc && trace.isSpanContextValid(sc) && info.trace_id === undefined) {
    info.trace_id = sc.traceId;
    info.span_id = sc.spanId;
  }
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
      traceFormat(),
      winston.format.timestamp(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Console()],
  });
}
