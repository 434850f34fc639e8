import { isToolError, type InstantTool, type ToolLogger } from '@mtg/tool-kit';
import type { ToolDefinition } from './tool-definition.ts';

/**
 * A pack's instant tool as the gateway serves it: the caller is the verified principal (never
 * its token), the result is the structured output as text and structuredContent, and a
 * ToolError becomes the tool's error (`isError`) with its code.
 */
export function serveInstantTool(tool: InstantTool, logger: ToolLogger): ToolDefinition {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: tool.inputSchema,
    ...(tool.outputSchema ? { outputSchema: tool.outputSchema } : {}),
    ...(tool.scope !== undefined ? { scope: tool.scope } : {}),
    async run({ principal, correlationId }, args) {
      const caller = {
        issuer: principal.issuer,
        tenant: principal.tenant,
        subject: principal.subject,
        client: principal.client,
        scopes: [...principal.scopes],
      };
      try {
        const structured = await tool.run(
          {
            caller,
            correlationId,
            logger: childLogger(logger, { tool: tool.name, correlationId }),
            signal: AbortSignal.timeout(30_000),
          },
          args,
        );
        return {
          content: [{ type: 'text', text: JSON.stringify(structured) }],
          structuredContent: structured,
        };
      } catch (error) {
        if (isToolError(error)) return toolErrorResult(error.code, error.message);
        throw error;
      }
    },
  };
}

/** Where a tool error's stable code travels in a CallToolResult. */
export const TOOL_ERROR_META = 'io.mcp-task-gateway/tool-error';

/**
 * The MCP shape of a tool's own error, the same for instant and long tools: the message as
 * text, the code in `_meta` (not structuredContent, which clients check against the tool's
 * output schema even for errors).
 */
export function toolErrorResult(code: string, message: string) {
  return {
    content: [{ type: 'text' as const, text: message }],
    isError: true,
    _meta: { [TOOL_ERROR_META]: { code } },
  };
}

function childLogger(logger: ToolLogger, fields: Record<string, unknown>): ToolLogger {
  const withFields = (f?: Record<string, unknown>) => ({ ...fields, ...f });
  return {
    debug: (m, f) => logger.debug(m, withFields(f)),
    info: (m, f) => logger.info(m, withFields(f)),
    warn: (m, f) => logger.warn(m, withFields(f)),
    error: (m, f) => logger.error(m, withFields(f)),
  };
}
