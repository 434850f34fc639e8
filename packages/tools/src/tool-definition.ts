import { z } from 'zod';
import type { Principal } from '@mtg/identity';
import type { ToolResult } from '@mtg/tool-kit';
import type { Workload } from '@mtg/policy';

export type { ToolResult };

export interface ToolContext {
  principal: Principal;
  correlationId: string;
  /** The caller's live token, for verbs that may exchange it; never stored or forwarded. */
  token?: string;
  /** The calling workload; the job tools hand it to the task verbs for the per-tool policy. */
  workload?: Workload;
}

/**
 * One tool as the gateway serves it, on every protocol era. `scope` is the OAuth scope a
 * caller must hold to see and call it; tools without one are open to any valid token. Pack
 * tools are adapted to this shape (instant-tool.ts); the gateway's own (whoami, job tools)
 * are written in it.
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

/** JSON Schema of a zod schema as tools/list shows it (no `$schema`). */
export function jsonSchemaOf(s: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(s, { io: 'input' }) as Record<
    string,
    unknown
  >;
  return rest;
}

export function toolListing(tool: ToolDefinition): ToolListing {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: jsonSchemaOf(tool.inputSchema),
    ...(tool.outputSchema ? { outputSchema: jsonSchemaOf(tool.outputSchema) } : {}),
  };
}
