import type { AnyTool, InstantTool, LongTool, Pack } from '@mtg/tool-kit';
import type { ToolLimitsOverrides } from '../tool-limits-config.ts';
import { registryFingerprint, toolFingerprint } from './fingerprint.ts';
import { RegistryError } from './registry-error.ts';

/** One loaded pack and the configuration it was given. */
export interface LoadedPack {
  pack: Pack;
  /** The pack's parsed configuration (its zod schema over the environment). */
  config: unknown;
}

export interface RegisteredTool {
  tool: AnyTool;
  pack: string;
  version: string;
  /** Schema fingerprint (fingerprint.ts). */
  fingerprint: string;
  /** The pg-boss queue of a long tool's jobs: one per tool and schema. */
  queue?: string;
}

/**
 * The one owner of the tool list: built once at start from TOOL_PACKS and handed to the
 * gateway, the worker and the tests. Everything that used to be written by hand in several
 * places (scopes, the policy's known tools, TOOL_LIMITS names, the IdP's scopes) is derived
 * from it.
 */
export interface ToolRegistry {
  readonly packs: ReadonlyArray<{ name: string; version: string; targets: readonly string[] }>;
  /** Long tools by name, with TOOL_LIMITS applied. */
  readonly long: ReadonlyMap<string, LongTool>;
  readonly instant: readonly InstantTool[];
  /** Every tool name the packs bring, in load order. */
  names(): string[];
  /** Every scope a pack tool requires, sorted. */
  scopes(): string[];
  /** Every target name a pack declared, sorted. */
  targets(): string[];
  entry(name: string): RegisteredTool | undefined;
  /** Queue of each long tool, by tool name. */
  queues(): ReadonlyMap<string, string>;
  /** Names, versions and schema fingerprints of every tool, hashed. */
  readonly fingerprint: string;
  /** Where a long tool's new tasks go, and what they record of the tool's version. */
  placement(name: string): {
    queue: string;
    version: string;
    fingerprint: string;
    registryFingerprint: string;
  };
}

/** Queue names stay within pg-boss's alphabet: tool names already do (TOOL_NAME). */
export function queueName(tool: string, fingerprint: string): string {
  return `tool.${tool}.${fingerprint.slice(0, 12)}`;
}

export function createRegistry(
  loaded: LoadedPack[],
  options: { limits?: ToolLimitsOverrides } = {},
): ToolRegistry {
  const entries = new Map<string, RegisteredTool>();
  const packs: Array<{ name: string; version: string; targets: readonly string[] }> = [];
  for (const { pack, config } of loaded) {
    let tools: readonly AnyTool[];
    try {
      tools = pack.tools(config);
    } catch (error) {
      throw new RegistryError(
        'pack_failed',
        `pack ${pack.name}: building its tools failed: ${messageOf(error)}`,
        error,
      );
    }
    packs.push({ name: pack.name, version: pack.version, targets: pack.targets });
    for (const tool of tools) {
      if (!tool || (tool.kind !== 'long' && tool.kind !== 'instant')) {
        throw new RegistryError(
          'invalid_tool',
          `pack ${pack.name}: every tool must come from defineTool or defineLongTool`,
        );
      }
      const previous = entries.get(tool.name);
      if (previous) {
        throw new RegistryError(
          'duplicate_tool',
          `tool ${tool.name} is defined twice: by pack ${previous.pack} and by pack ${pack.name}`,
        );
      }
      const fingerprint = toolFingerprint(tool);
      const origin = {
        pack: pack.name,
        version: pack.version,
        targets: pack.targets,
        // A pack made with a kit before `upstreams` existed declares none.
        upstreams: pack.upstreams ?? [],
      };
      const withOrigin = { ...tool, origin } as AnyTool;
      entries.set(tool.name, {
        tool: withOrigin,
        pack: pack.name,
        version: pack.version,
        fingerprint,
        ...(tool.kind === 'long' ? { queue: queueName(tool.name, fingerprint) } : {}),
      });
    }
  }

  const overrides = options.limits ?? {};
  for (const name of Object.keys(overrides)) {
    if (entries.get(name)?.tool.kind !== 'long') {
      throw new RegistryError(
        'unknown_tool',
        `TOOL_LIMITS names ${name}, which is not a long tool of the loaded packs`,
      );
    }
  }
  const long = new Map<string, LongTool>();
  const instant: InstantTool[] = [];
  for (const [name, e] of entries) {
    if (e.tool.kind === 'long') {
      const limited = { ...e.tool, limits: { ...e.tool.limits, ...overrides[name] } };
      e.tool = limited;
      long.set(name, limited);
    } else {
      instant.push(e.tool);
    }
  }
  const queues = new Map([...entries].flatMap(([n, e]) => (e.queue ? [[n, e.queue]] : [])));
  const fingerprint = registryFingerprint(
    [...entries.values()].map((e) => ({
      name: e.tool.name,
      version: e.version,
      fingerprint: e.fingerprint,
    })),
  );

  return {
    packs,
    long,
    instant,
    fingerprint,
    names: () => [...entries.keys()],
    scopes: () =>
      [
        ...new Set(
          [...entries.values()].flatMap((e) => [
            ...(e.tool.scope !== undefined ? [e.tool.scope] : []),
            // An approver's scope is one the authorization server must issue too.
            ...((e.tool as { approvalScopes?: readonly string[] }).approvalScopes ?? []),
          ]),
        ),
      ].sort(),
    targets: () => [...new Set(packs.flatMap((p) => p.targets))].sort(),
    entry: (name) => entries.get(name),
    queues: () => queues,
    placement(name) {
      const e = entries.get(name);
      if (!e?.queue) throw new TypeError(`${name} is not a long tool of this registry`);
      return {
        queue: e.queue,
        version: e.version,
        fingerprint: e.fingerprint,
        registryFingerprint: fingerprint,
      };
    },
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
