import { z } from 'zod';
import type { Principal } from '@mtg/identity';
import type { Workload } from '@mtg/policy';

/** What a tool returns: an MCP CallToolResult. */
export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export interface ToolContext {
  principal: Principal;
  correlationId: string;
  /** The caller's live token, for verbs that may exchange it; never stored or forwarded. */
  token?: string;
  /** The calling workload; the job tools hand it to the task verbs for the per-tool policy. */
  workload?: Workload;
}

/**
 * One tool, described once and served on every protocol era. `scope` is the OAuth scope a
 * caller must hold to see and call it; tools without one are open to any valid token.
 */
export interface ToolDefinition<I = unknown> {
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodType<I>;
  outputSchema?: z.ZodType;
  scope?: string;
  run(context: ToolContext, args: I): Promise<ToolResult>;
}

/** The `tools/list` entry of a tool, JSON Schema derived from its zod schema. */
export interface ToolListing {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

export function toolListing(tool: ToolDefinition): ToolListing {
  const schema = (s: z.ZodType) => {
    const { $schema: _ignored, ...rest } = z.toJSONSchema(s, { io: 'input' }) as Record<
      string,
      unknown
    >;
    return rest;
  };
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: schema(tool.inputSchema),
    ...(tool.outputSchema ? { outputSchema: schema(tool.outputSchema) } : {}),
  };
}
