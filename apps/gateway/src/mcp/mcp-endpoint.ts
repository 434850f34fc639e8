import type { Clock } from '@mtg/clock';
import type { NextFunction, Request, Response } from 'express';
import { createMcpHandler, isLegacyRequest } from '@modelcontextprotocol/server';
import { toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from '@mtg/log';
import type { Dispatch } from './dispatch.ts';
import { createLegacyServer } from './legacy-server.ts';
import { createModernServer } from './modern-server.ts';
import { fastTasksGet } from './fast-tasks-get.ts';
import { fastTasksResult } from './fast-tasks-result.ts';
import { fastTaskStart } from './fast-task-start.ts';
import { sendAnswer } from './fast-wire.ts';
import { answerFromResponse } from './legacy-elicitation.ts';
import { RPC, sendRpcError } from '../http/json-rpc-error.ts';
import {
  RequestAuthInfo,
  requestContextFromAuthInfo,
  requestContextOf,
  type RequestContext,
} from '../http/request-context.ts';

/**
 * One /mcp endpoint for every protocol era. 2026-07-28 requests (per-request `_meta`
 * envelope, `server/discover`) go to the v2 SDK's stateless handler; everything else
 * (`initialize`-based 2025-11-25 / 2025-06-18 / 2025-03-26) to a fresh v1 server and a
 * stateless transport per request. Either way no state survives the request, so any
 * replica answers any request.
 */
export function mcpEndpoint(
  dispatch: Dispatch,
  logger: Logger,
  options: { resultWaitMs: number; tasksGetFastPath?: boolean; clock?: Clock },
) {
  const fast = options.tasksGetFastPath === false ? undefined : fastTasksGet(dispatch);
  const fastResult = fast && fastTasksResult(dispatch, options);
  const modern = toNodeHandler(
    // The factory gets the request's context back from the authInfo it was handed.
    createMcpHandler((f) => createModernServer(dispatch, requestContextFromAuthInfo(f.authInfo)), {
      legacy: 'reject',
      responseMode: 'auto',
      onerror: (error) => logger.warn('mcp modern error', { error: error.message }),
    }),
    { onerror: (error) => logger.error('mcp modern adapter error', { error: error.message }) },
  );

  async function legacy(req: Request, res: Response, request: RequestContext) {
    const server = createLegacyServer(dispatch, request, options);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      // tasks/result may carry the task's questions before its answer: a stream.
      enableJsonResponse: (req.body as { method?: unknown } | undefined)?.method !== 'tasks/result',
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req as never, res as never, req.body);
  }

  // A failure goes to the app's last-resort handler (create-app.ts), which tells a database
  // outage (503 + Retry-After) from a bug (500) for every route alike.
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      if (req.method !== 'POST') {
        // Stateless: no standalone SSE stream (GET) and no sessions to delete (DELETE).
        res.setHeader('Allow', 'POST');
        sendRpcError(
          res,
          405,
          RPC.invalidRequest,
          'Method not allowed: this endpoint is stateless; use POST',
        );
        return;
      }
      const request = requestContextOf(res);
      if (fast && (await fast(req, res, request))) return;
      if (fastResult && (await fastResult(req, res, request))) return;
      const started = fast ? await fastTaskStart(dispatch, req, request) : undefined;
      if (started) return sendAnswer(res, started);
      if (await answerFromResponse(req.body, res, { dispatch, request, logger })) return;
      // The SDKs hand `req.auth` to their handlers as authInfo: it carries the context.
      (req as Request & { auth?: RequestAuthInfo }).auth = new RequestAuthInfo(request);
      const probe = await toWebRequest(req as never, req.body);
      if (await isLegacyRequest(probe, req.body)) await legacy(req, res, request);
      else await modern(req as never, res as never, req.body);
    } catch (error) {
      next(error);
    }
  };
}
