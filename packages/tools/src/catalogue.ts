import type { Principal } from '@mtg/identity';
import type { Workload } from '@mtg/policy';
import type { ToolDefinition, ToolResult } from './tool-definition.ts';
import { RegistryError } from './registry/registry-error.ts';

export type CallOutcome =
  | { ok: true; result: ToolResult }
  | { ok: false; code: 'unknown_tool'; message: string }
  | { ok: false; code: 'insufficient_scope'; message: string; scope: string };

export interface Catalogue {
  /** Tools this principal may see and call. */
  visibleTo(principal: Principal): ToolDefinition[];
  get(name: string): ToolDefinition | undefined;
  /** Validates arguments and runs the tool; invalid arguments are a tool error (isError). */
  call(
    principal: Principal,
    name: string,
    args: unknown,
    correlationId: string,
    token?: string,
    workload?: Workload,
  ): Promise<CallOutcome>;
}

/** The instant tools the gateway serves; a name given twice is refused (RegistryError). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tools of any input type; each one's schema parses its arguments
export function createCatalogue(tools: ToolDefinition<any>[]): Catalogue {
  const byName = new Map<string, ToolDefinition>();
  for (const t of tools) {
    if (byName.has(t.name)) {
      throw new RegistryError(
        'duplicate_tool',
        `tool ${t.name} is defined twice (a pack tool may not take a gateway tool's name)`,
      );
    }
    byName.set(t.name, t as ToolDefinition);
  }
  const allowed = (p: Principal, t: ToolDefinition) => !t.scope || p.scopes.includes(t.scope);
  return {
    visibleTo: (principal) => tools.filter((t) => allowed(principal, t)),
    get: (name) => byName.get(name),
    async call(principal, name, args, correlationId, token, workload) {
      const tool = byName.get(name);
      if (!tool) return { ok: false, code: 'unknown_tool', message: `Unknown tool: ${name}` };
      if (!allowed(principal, tool)) {
        return {
          ok: false,
          code: 'insufficient_scope',
          message: `Tool ${name} requires scope ${tool.scope}`,
          scope: tool.scope!,
        };
      }
      const parsed = tool.inputSchema.safeParse(args ?? {});
      if (!parsed.success) {
        const detail = parsed.error.issues
          .map((i) => `${i.path.join('.') || '(arguments)'}: ${i.message}`)
          .join('; ');
        return {
          ok: true,
          result: {
            isError: true,
            content: [{ type: 'text', text: `Invalid arguments: ${detail}` }],
          },
        };
      }
      return {
        ok: true,
        result: await tool.run(
          {
            principal,
            correlationId,
            ...(token ? { token } : {}),
            ...(workload ? { workload } : {}),
          },
          parsed.data,
        ),
      };
    },
  };
}
