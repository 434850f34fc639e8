import { ConfigError, parseConfig } from '@mtg/config';
import { z } from 'zod';
import { startTracing, type Tracing } from './start-tracing.ts';

const schema = z.object({
  /** The OTLP/HTTP collector; unset: no tracing at all. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ error: 'must be an http(s) URL' }).optional(),
  /** `key=value,key2=value2`, as the OpenTelemetry SDKs read it. */
  OTEL_EXPORTER_OTLP_HEADERS: z.string().optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_BSP_SCHEDULE_DELAY: z.coerce.number().int().min(0).optional(),
});

/**
 * Starts tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/operations.md, "Tracing");
 * resolves to undefined otherwise, having loaded nothing. Invalid values throw ConfigError.
 */
export async function startTracingFromEnv(
  env: Record<string, string | undefined>,
  service: string,
  instanceId?: string,
): Promise<Tracing | undefined> {
  const config = parseConfig(schema, env);
  if (!config.OTEL_EXPORTER_OTLP_ENDPOINT) return undefined;
  const headers: Record<string, string> = {};
  for (const pair of (config.OTEL_EXPORTER_OTLP_HEADERS ?? '').split(',')) {
    if (!pair.trim()) continue;
    const i = pair.indexOf('=');
    if (i <= 0)
      throw new ConfigError([
        {
          variable: 'OTEL_EXPORTER_OTLP_HEADERS',
          message: 'must be key=value pairs, comma-separated',
        },
      ]);
    headers[pair.slice(0, i).trim()] = decodeURIComponent(pair.slice(i + 1).trim());
  }
  return startTracing({
    serviceName: config.OTEL_SERVICE_NAME ?? service,
    endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT,
    ...(Object.keys(headers).length ? { headers } : {}),
    ...(config.OTEL_BSP_SCHEDULE_DELAY !== undefined
      ? { scheduledDelayMs: config.OTEL_BSP_SCHEDULE_DELAY }
      : {}),
    ...(instanceId ? { instanceId } : {}),
  });
}
