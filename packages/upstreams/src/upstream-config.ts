import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/**
 * Glossary
 * - upstream: an existing MCP server (Streamable HTTP) the gateway fronts. Its tools become
 *   registry entries under `prefix`.
 * - mode: how one upstream tool is served. `instant`: the gateway proxies the call within the
 *   request. `task`: a durable task a worker runs. `auto`: a task when the upstream advertises
 *   `execution.taskSupport` for the tool, else instant.
 */

/** The highest `maxTools` an upstream may be given, and the default. */
export const MAX_TOOLS_LIMIT = 10_000;
export const DEFAULT_MAX_TOOLS = 500;

const positiveInt = () => z.number().int().positive();
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;

const limitsSchema = z
  .object({
    defaultDeadlineMs: positiveInt().optional(),
    maxDeadlineMs: positiveInt().optional(),
    retentionMs: positiveInt().optional(),
    deleteResultOnRead: z.boolean().optional(),
    maxResultBytes: positiveInt().optional(),
  })
  .strict();

export const upstreamToolSchema = z
  .object({
    /** OAuth scope the gateway requires to see and call the tool (default: the upstream's). */
    scope: z.string().regex(SCOPE, 'must be one OAuth scope token').optional(),
    mode: z.enum(['task', 'instant', 'auto']).optional(),
    limits: limitsSchema.optional(),
    /** Bound on one upstream request of this tool (an instant call, a poll, a plain call). */
    timeoutMs: positiveInt().optional(),
  })
  .strict();

export const upstreamSchema = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    /** The token audience (RFC 8693 resource or audience, per EXCHANGE_STYLE); default: url. */
    audience: z.string().min(1).optional(),
    /**
     * Prepended to every tool name; tool names stay within [A-Za-z0-9_.-]{1,64}. Never empty,
     * and never the start of another upstream's prefix: names of two upstreams cannot collide.
     */
    prefix: z
      .string()
      .regex(
        /^[A-Za-z0-9_.-]{1,32}$/,
        'letters, digits, _ . - (1 to 32; an empty prefix is refused)',
      )
      .optional(),
    /** Scope required for the upstream's tools unless a tool says otherwise. */
    scope: z.string().regex(SCOPE, 'must be one OAuth scope token'),
    include: z.array(z.string().min(1)).optional(),
    exclude: z.array(z.string().min(1)).optional(),
    /** Default mode of the upstream's tools (default: auto). */
    mode: z.enum(['task', 'instant', 'auto']).optional(),
    tools: z.record(z.string().min(1), upstreamToolSchema).optional(),
    timeoutMs: positiveInt().optional(),
    /** How often the listing is refreshed (besides notifications/tools/list_changed). */
    refreshMs: z.number().int().min(1000).optional(),
    /** Requests in flight to this upstream per process. */
    maxConcurrency: positiveInt().max(10_000).optional(),
    breakerThreshold: positiveInt().optional(),
    breakerCooldownMs: positiveInt().optional(),
    /** Upstream answers larger than this are refused. */
    maxResponseBytes: positiveInt().optional(),
    /** Open MCP sessions kept for instant calls, per process (0: a new session per call). */
    maxSessions: z.number().int().min(0).max(10_000).optional(),
    /** A kept session unused this long is closed. */
    sessionIdleMs: z.number().int().min(1000).optional(),
    /** Tools served from this upstream at most; the rest of a listing is refused (over_cap). */
    maxTools: z.number().int().min(1).max(MAX_TOOLS_LIMIT).optional(),
  })
  .strict();

export const upstreamsDocument = z
  .object({
    upstreams: z.record(
      z.string().regex(/^[a-z][a-z0-9-]{0,30}$/, 'upstream names: a-z, 0-9, - (at most 31)'),
      upstreamSchema,
    ),
  })
  .strict();

export type UpstreamToolSettings = z.infer<typeof upstreamToolSchema>;

/** One upstream with every default applied. */
export interface UpstreamConfig {
  name: string;
  url: string;
  audience: string;
  prefix: string;
  scope: string;
  include?: string[];
  exclude: string[];
  mode: 'task' | 'instant' | 'auto';
  tools: Record<string, UpstreamToolSettings>;
  timeoutMs: number;
  refreshMs: number;
  maxConcurrency: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
  maxResponseBytes: number;
  maxSessions: number;
  sessionIdleMs: number;
  maxTools: number;
}

export class UpstreamConfigError extends Error {
  readonly code = 'invalid_upstreams';
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamConfigError';
  }
}

/** Parses an UPSTREAMS_FILE document (already read); throws naming the file and the field. */
export function parseUpstreams(raw: unknown, file: string): UpstreamConfig[] {
  const parsed = upstreamsDocument.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join('.') || '(document)'}: ${i.message}`)
      .join('; ');
    throw new UpstreamConfigError(`UPSTREAMS_FILE ${file}: ${problems}`);
  }
  const configs = Object.entries(parsed.data.upstreams).map(([name, u]) => {
    const prefix = u.prefix ?? `${name.replace(/-/g, '_')}.`;
    return {
      name,
      url: u.url,
      audience: u.audience ?? u.url.replace(/\/$/, ''),
      prefix,
      scope: u.scope,
      ...(u.include ? { include: u.include } : {}),
      exclude: u.exclude ?? [],
      mode: u.mode ?? 'auto',
      tools: u.tools ?? {},
      timeoutMs: u.timeoutMs ?? 30_000,
      refreshMs: u.refreshMs ?? 60_000,
      maxConcurrency: u.maxConcurrency ?? 32,
      breakerThreshold: u.breakerThreshold ?? 5,
      breakerCooldownMs: u.breakerCooldownMs ?? 5_000,
      maxResponseBytes: u.maxResponseBytes ?? 4 * 1024 * 1024,
      maxSessions: u.maxSessions ?? 256,
      sessionIdleMs: u.sessionIdleMs ?? 60_000,
      maxTools: u.maxTools ?? DEFAULT_MAX_TOOLS,
    };
  });
  refuseOverlappingPrefixes(configs, file);
  return configs;
}

/**
 * No prefix may begin another (nor equal it): `a.` and `a.b.` would both claim `a.b.x`, and
 * the catalogue keeps one row per served name, so one upstream's listing would block the
 * other's. Refused at load, naming both upstreams.
 */
function refuseOverlappingPrefixes(configs: readonly UpstreamConfig[], file: string): void {
  for (const a of configs) {
    for (const b of configs) {
      if (a === b || !b.prefix.startsWith(a.prefix)) continue;
      // Report the later upstream of the file, as it is the one an operator just added.
      const [first, second] = configs.indexOf(a) < configs.indexOf(b) ? [a, b] : [b, a];
      const relation =
        a.prefix === b.prefix ? 'is the same as' : second === b ? 'begins with' : 'is the start of';
      throw new UpstreamConfigError(
        `UPSTREAMS_FILE ${file}: upstreams.${second.name}.prefix: ${JSON.stringify(second.prefix)} ` +
          `${relation} the prefix ${JSON.stringify(first.prefix)} of upstream ${first.name} ` +
          `(no prefix may begin another: their tool names could collide)`,
      );
    }
  }
}

/** Reads UPSTREAMS_FILE (YAML or JSON). Unset: no upstreams. */
export function loadUpstreams(file: string | undefined): UpstreamConfig[] {
  if (!file) return [];
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UpstreamConfigError(`UPSTREAMS_FILE ${file}: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new UpstreamConfigError(
      `UPSTREAMS_FILE ${file}: not YAML or JSON: ${(error as Error).message}`,
    );
  }
  return parseUpstreams(raw, file);
}

/** The pg-boss queue of an upstream's task-mode tools: one per upstream, known from config. */
export function upstreamQueue(upstream: string): string {
  return `upstream.${upstream}`;
}
