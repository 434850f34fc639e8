import type { NextFunction, Request, Response } from 'express';
import type { Catalogue, LongToolDefinition } from '@mtg/tools';
import { principalOf, refuseScope } from './authenticate.ts';

/**
 * Step-up signal of the MCP authorization spec: a `tools/call` for a tool whose scope the
 * token lacks gets HTTP 403 `insufficient_scope` naming the scope, before any SDK or tool
 * code runs. (Unknown tools fall through to the protocol's own -32602.)
 */
export function requireToolScope(
  catalogue: Catalogue,
  longTools: ReadonlyMap<string, LongToolDefinition>,
  resourceMetadataUrl: string,
  onDenied?: (req: Request, code: string, tool: string, res: Response) => void,
) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'POST') return next();
    const body: unknown = req.body;
    const messages = (Array.isArray(body) ? body : [body]) as Array<{
      method?: unknown;
      params?: { name?: unknown };
    }>;
    const principal = principalOf(res);
    for (const m of messages) {
      if (m.method !== 'tools/call' || typeof m.params?.name !== 'string') continue;
      const tool = catalogue.get(m.params.name) ?? longTools.get(m.params.name);
      if (tool?.scope && !principal.scopes.includes(tool.scope)) {
        onDenied?.(req, 'insufficient_scope', tool.name, res);
        refuseScope(
          res,
          resourceMetadataUrl,
          tool.scope,
          `tool ${tool.name} requires scope ${tool.scope}`,
        );
        return;
      }
    }
    next();
  };
}
