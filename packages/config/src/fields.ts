import { z } from 'zod';

/** A TCP port number given as a string in the environment. */
export const port = (fallback: number) =>
  z.coerce.number().int().min(0).max(65535).default(fallback);

/** An absolute http(s) URL. */
export const url = () => z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' });

/** A PostgreSQL connection URL (postgres:// or postgresql://); `required` names the example. */
export const postgresUrl = (required?: string) =>
  z
    .string(required ? { error: required } : undefined)
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL');

/** A comma-separated list; empty entries dropped. */
export const csv = () =>
  z.string().transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );

/** A JSON object mapping names to strings, e.g. client secrets. */
export const jsonRecord = () =>
  z.string().transform((s, ctx) => {
    try {
      const value: unknown = JSON.parse(s);
      const record = z.record(z.string(), z.string()).parse(value);
      return record;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object of string values' });
      return z.NEVER;
    }
  });

/** "true"/"false"/"1"/"0". */
export const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1');

/** A JSON document in one variable, parsed; pipe it into the schema of its shape. */
export const json = () =>
  z.string().transform((s, ctx): unknown => {
    try {
      return JSON.parse(s) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be JSON' });
      return z.NEVER;
    }
  });
