import type { z } from 'zod';
import type { InstantTool, InstantToolContext, Json } from './tool-types.ts';
import { assertToolName, assertScope } from './tool-names.ts';

export interface ToolSpec<S extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  /** zod schema of the arguments; the JSON Schema of tools/list is derived from it. */
  input: S;
  output?: z.ZodType;
  /** OAuth scope a caller must hold to see and call the tool; none: any valid token. */
  scope?: string;
  run(ctx: InstantToolContext, args: z.infer<S>): Promise<Json>;
}

/** An instant tool: validated arguments in, a structured result out, within the request. */
export function defineTool<S extends z.ZodType>(spec: ToolSpec<S>): InstantTool<z.infer<S>> {
  assertToolName(spec.name);
  if (spec.scope !== undefined) assertScope(spec.scope, spec.name);
  return Object.freeze({
    kind: 'instant' as const,
    name: spec.name,
    title: spec.title,
    description: spec.description,
    inputSchema: spec.input as z.ZodType<z.infer<S>>,
    ...(spec.output ? { outputSchema: spec.output } : {}),
    ...(spec.scope !== undefined ? { scope: spec.scope } : {}),
    run: spec.run.bind(spec),
  });
}
