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

/**
 * Each schema's JSON Schema, converted once: a zod schema is not changed after it is built,
 * and the conversion is the costliest part of a tools/list or of the listing a tools/call
 * looks its tool up in (about a sixth of a 2025-wire job-tool poll's CPU before it was kept).
 */
const converted = new WeakMap<z.ZodType, Readonly<Record<string, unknown>>>();

/**
 * JSON Schema of a zod schema as tools/list shows it (no `$schema`). The same frozen object
 * for the same schema each time: copy it to change it.
 */
export function jsonSchemaOf(s: z.ZodType): Record<string, unknown> {
  const known = converted.get(s);
  if (known) return known;
  const { $schema: _ignored, ...rest } = z.toJSONSchema(s, { io: 'input' }) as Record<
    string,
    unknown
  >;
  const frozen = deepFreeze(rest);
  converted.set(s, frozen);
  return frozen;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
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
