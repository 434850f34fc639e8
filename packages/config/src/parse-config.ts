import type { z } from 'zod';

/** A configuration problem, naming the environment variable at fault. */
export class ConfigError extends Error {
  readonly code = 'invalid_config';
  readonly issues: { variable: string; message: string }[];
  constructor(issues: { variable: string; message: string }[]) {
    super(
      'invalid configuration:\n' + issues.map((i) => `  ${i.variable}: ${i.message}`).join('\n'),
    );
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

/**
 * Parses an environment-shaped record with a zod object schema whose keys are the variable
 * names. Throws ConfigError naming every bad variable; main.ts decides how to exit.
 */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
): z.infer<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    parsed.error.issues.map((issue) => ({
      variable: issue.path.map(String).join('.') || '(environment)',
      message: issue.message,
    })),
  );
}
