import type { z } from 'zod';
import type { AnyTool } from './tool-types.ts';

const TARGET_NAME = /^[a-z][a-z0-9-]{0,62}$/;
/** As UPSTREAMS_FILE names them. */
const UPSTREAM_NAME = /^[a-z][a-z0-9-]{0,30}$/;

export interface PackSpec<C extends z.ZodType = z.ZodType<Record<string, never>>> {
  /** Usually the package name, e.g. `@acme/tools`. */
  name: string;
  /** The pack's version: recorded with every task it runs. */
  version: string;
  /**
   * zod schema of the pack's own environment variables, parsed once at start. A bad value
   * stops the gateway or worker with exit code 2 naming the pack and the variable.
   */
  config?: C;
  /** Names of the targets (downstream systems) the pack's long tools call. */
  targets?: readonly string[];
  /**
   * Names of the upstream MCP servers (UPSTREAMS_FILE) the pack's long tools call with
   * `ctx.upstream(name)`: the only names it accepts. A worker serving the pack refuses to
   * start when one is not configured.
   */
  upstreams?: readonly string[];
  /** The tools, or a function of the parsed configuration that returns them. */
  tools: readonly AnyTool[] | ((config: z.infer<C>) => readonly AnyTool[]);
}

/** A pack as the registry loads it. */
export interface Pack {
  kind: 'pack';
  name: string;
  version: string;
  config?: z.ZodType;
  targets: readonly string[];
  upstreams: readonly string[];
  tools(config: unknown): readonly AnyTool[];
}

/** A module's face to the registry: tools plus their configuration and targets. */
export function definePack<C extends z.ZodType = z.ZodType<Record<string, never>>>(
  spec: PackSpec<C>,
): Pack {
  if (!spec.name || typeof spec.name !== 'string') throw new TypeError('a pack needs a name');
  if (!spec.version || typeof spec.version !== 'string') {
    throw new TypeError(`pack ${spec.name} needs a version`);
  }
  const targets = [...(spec.targets ?? [])];
  for (const t of targets) {
    if (!TARGET_NAME.test(t)) {
      throw new TypeError(
        `pack ${spec.name}: target name ${JSON.stringify(t)} must match ${TARGET_NAME}`,
      );
    }
  }
  const upstreams = [...(spec.upstreams ?? [])];
  for (const u of upstreams) {
    if (!UPSTREAM_NAME.test(u)) {
      throw new TypeError(
        `pack ${spec.name}: upstream name ${JSON.stringify(u)} must match ${UPSTREAM_NAME}`,
      );
    }
  }
  const tools = spec.tools;
  return Object.freeze({
    kind: 'pack' as const,
    name: spec.name,
    version: spec.version,
    ...(spec.config ? { config: spec.config } : {}),
    targets,
    upstreams,
    tools: (config: unknown) => (typeof tools === 'function' ? tools(config as z.infer<C>) : tools),
  });
}

export function isPack(value: unknown): value is Pack {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === 'pack' &&
    typeof (value as { tools?: unknown }).tools === 'function'
  );
}
