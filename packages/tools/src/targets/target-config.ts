import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

const positiveInt = () => z.number().int().positive();

/**
 * One downstream system tools call through `ctx.target(name)`. Its token is exchanged for
 * `audience` (RFC 8693 `resource` or `audience`, per EXCHANGE_STYLE); `scopes`, when given,
 * narrow what that token carries (they must be held by the task's delegation, which holds the
 * tool's scope); the resilience settings default to the worker's DOWNSTREAM_* values.
 */
export const targetSchema = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    audience: z.string().min(1).optional(),
    scopes: z.array(z.string().min(1)).min(1).optional(),
    attemptTimeoutMs: positiveInt().optional(),
    retries: z.number().int().min(0).max(10).optional(),
    backoffInitialMs: positiveInt().optional(),
    backoffMaxMs: positiveInt().optional(),
    breakerThreshold: positiveInt().optional(),
    breakerCooldownMs: positiveInt().optional(),
  })
  .strict();

export const targetsDocument = z
  .object({
    targets: z.record(
      z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'target names: a-z, 0-9, -'),
      targetSchema,
    ),
  })
  .strict();

export type TargetSettings = z.infer<typeof targetSchema>;

export interface TargetConfig extends TargetSettings {
  name: string;
  audience: string;
}

/**
 * The targets of a process: TARGETS_FILE (YAML or JSON, `targets: { name: { url, … } }`),
 * plus `downstream` from DOWNSTREAM_URL / DOWNSTREAM_RESOURCE unless the file defines it.
 * Throws a TargetConfigError naming the file and field.
 */
export function loadTargets(options: {
  file?: string;
  downstreamUrl: string;
  downstreamResource: string;
}): Map<string, TargetConfig> {
  const targets = new Map<string, TargetConfig>();
  if (options.file) {
    let text: string;
    try {
      text = readFileSync(options.file, 'utf8');
    } catch (error) {
      throw new TargetConfigError(`TARGETS_FILE ${options.file}: ${(error as Error).message}`);
    }
    let raw: unknown;
    try {
      raw = parseYaml(text);
    } catch (error) {
      throw new TargetConfigError(
        `TARGETS_FILE ${options.file}: not YAML or JSON: ${(error as Error).message}`,
      );
    }
    const parsed = targetsDocument.safeParse(raw);
    if (!parsed.success) {
      const problems = parsed.error.issues
        .map((i) => `${i.path.join('.') || '(document)'}: ${i.message}`)
        .join('; ');
      throw new TargetConfigError(`TARGETS_FILE ${options.file}: ${problems}`);
    }
    for (const [name, t] of Object.entries(parsed.data.targets)) {
      targets.set(name, { ...t, name, audience: t.audience ?? t.url.replace(/\/$/, '') });
    }
  }
  if (!targets.has('downstream')) {
    targets.set('downstream', {
      name: 'downstream',
      url: options.downstreamUrl,
      audience: options.downstreamResource,
    });
  }
  return targets;
}

export class TargetConfigError extends Error {
  readonly code = 'invalid_targets';
  constructor(message: string) {
    super(message);
    this.name = 'TargetConfigError';
  }
}
