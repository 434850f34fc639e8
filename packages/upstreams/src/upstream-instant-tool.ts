import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import type { Logger } from '@mtg/log';
import { toolErrorResult, type ToolDefinition, type ToolResult } from '@mtg/tools';
import type { CatalogueEntry } from './catalogue-store.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { isUpstreamError, UpstreamError } from './upstream-error.ts';
import type { UpstreamGuard } from './upstream-guard.ts';
import type { CallLimitDecision } from './upstream-call-limit.ts';
import { inputSchemaOf, scopeOf } from './upstream-long-tool.ts';
import type {
  ExchangedToken,
  SessionCaller,
  UpstreamSessionPool,
} from './upstream-session-pool.ts';

export interface InstantProxyDeps {
  pool: Pool;
  logger: Logger;
  guard: UpstreamGuard;
  /**
   * The caller's token exchanged (RFC 8693) for the upstream's audience: the upstream never
   * sees the token the caller sent the gateway.
   */
  exchange(
    callerToken: string,
    audience: string,
    scope: string,
    options?: { fresh?: boolean },
  ): Promise<ExchangedToken>;
  /** The upstream's open sessions, one per caller and exchanged token. */
  sessions: UpstreamSessionPool;
  /** The per-caller limit on proxied calls. */
  limit: (caller: {
    tenant: string;
    subject: string;
    client: string;
  }) => Promise<CallLimitDecision>;
}

/**
 * An upstream tool proxied within the request: the gateway exchanges the caller's token for
 * the upstream's audience, sends one tools/call, and audits the call (caller, upstream, tool,
 * outcome, duration, argument keys). Every failure is the tool's error with a stable code,
 * never a 500.
 */
export function upstreamInstantTool(
  upstream: UpstreamConfig,
  entry: CatalogueEntry,
  deps: InstantProxyDeps,
): ToolDefinition {
  const scope = scopeOf(upstream, entry);
  const timeoutMs = upstream.tools[entry.upstreamName]?.timeoutMs ?? upstream.timeoutMs;
  const audit = async (
    principal: { tenant: string; subject: string; client: string },
    correlationId: string,
    args: unknown,
    outcome: string,
    started: number,
  ) => {
    await appendAuditGrouped(deps.pool, {
      type: 'upstream.call',
      tenant: principal.tenant,
      subject: principal.subject,
      client: principal.client,
      tool: entry.name,
      correlationId,
      actor: { subject: principal.subject, client: principal.client, kind: 'user' },
      data: {
        upstream: upstream.name,
        upstreamTool: entry.upstreamName,
        mode: 'instant',
        outcome,
        durationMs: Math.round(performance.now() - started),
        argumentKeys: Object.keys((args as Record<string, unknown>) ?? {}).slice(0, 20),
      },
    });
  };

  /**
   * One tools/call on the caller's upstream session (a kept one, or a new one). A session the
   * upstream dropped (HTTP 404) is retried once on a new session; a 401 is answered with one
   * re-exchange and a new session; a session that failed otherwise is not used again.
   */
  const callOnSession = async (
    caller: SessionCaller,
    callerToken: string,
    name: string,
    args: Record<string, unknown>,
  ): Promise<Record<string, unknown>> => {
    let exchanged = await deps.exchange(callerToken, upstream.audience, scope);
    let reExchanged = false;
    let retriedDropped = false;
    for (;;) {
      const lease = await deps.sessions.acquire(caller, exchanged).catch(async (error) => {
        if (reExchanged || !isUnauthorized(error)) throw error;
        // Refused while opening: one fresh exchange, then the new session's answer stands.
        reExchanged = true;
        exchanged = await deps.exchange(callerToken, upstream.audience, scope, { fresh: true });
        return deps.sessions.acquire(caller, exchanged);
      });
      try {
        return await lease.connection.request(
          'tools/call',
          { name, arguments: args },
          { timeoutMs },
        );
      } catch (error) {
        if (isUpstreamError(error) && error.status === 404 && !retriedDropped) {
          lease.evict({ dropped: true });
          retriedDropped = true;
          continue;
        }
        if (isUnauthorized(error) && !reExchanged) {
          lease.evict();
          reExchanged = true;
          exchanged = await deps.exchange(callerToken, upstream.audience, scope, { fresh: true });
          continue;
        }
        // A JSON-RPC error is the upstream answering: the session is as it was. Anything
        // else (timeout, 5xx, a malformed answer, a second 401 or 404) may have left it
        // unusable.
        const answered =
          isUpstreamError(error) && error.code === 'upstream_refused' && (error.status ?? 0) < 0;
        if (!answered) lease.evict({ dropped: isUpstreamError(error) && error.status === 404 });
        throw error;
      } finally {
        lease.release();
      }
    }
  };
  return {
    name: entry.name,
    title: entry.title ?? entry.upstreamName,
    description: entry.description || `${entry.upstreamName} (upstream ${upstream.name})`,
    inputSchema: inputSchemaOf(entry),
    scope,
    async run({ principal, correlationId, token }, args) {
      const started = performance.now();
      // Over the caller's limit: refused before any exchange or upstream request, audited.
      const admitted = await deps.limit(principal);
      if (!admitted.ok) {
        await audit(principal, correlationId, args, 'rate_limited', started);
        return toolErrorResult(
          'rate_limited',
          `Too many calls to upstream ${upstream.name}; retry in ${admitted.retryAfterSeconds}s`,
        );
      }
      let outcome = 'ok';
      let result: ToolResult;
      try {
        if (!token) {
          throw new UpstreamError(
            'upstream_unauthorized',
            upstream.name,
            'no caller token to exchange for the upstream',
          );
        }
        const answer = await deps.guard
          .run(undefined, () =>
            callOnSession(principal, token, entry.upstreamName, args as Record<string, unknown>),
          )
          .catch((error: unknown) => {
            // The upstream is failing: none of its kept sessions is trusted any more.
            if (isUpstreamError(error) && error.code === 'upstream_circuit_open') {
              deps.sessions.evictAll();
            }
            throw error;
          });
        if (!Array.isArray(answer.content)) {
          throw new UpstreamError(
            'upstream_protocol_error',
            upstream.name,
            `upstream ${upstream.name} answered tools/call without content`,
          );
        }
        result = asCallerSees(answer);
        if (result.isError) outcome = 'tool_error';
      } catch (error) {
        if (!isUpstreamError(error)) {
          deps.logger.warn('upstream call failed', {
            upstream: upstream.name,
            tool: entry.name,
            error: error instanceof Error ? error.message : String(error),
          });
        }
        const e = isUpstreamError(error)
          ? error
          : new UpstreamError(
              'upstream_protocol_error',
              upstream.name,
              `upstream ${upstream.name} could not be called`,
            );
        outcome = e.code;
        result = toolErrorResult(e.code, e.message);
      }
      await audit(principal, correlationId, args, outcome, started);
      return result;
    },
  };
}

const isUnauthorized = (error: unknown) =>
  isUpstreamError(error) && error.code === 'upstream_unauthorized';

/**
 * What the upstream tool returned, as the caller gets it: its content, structuredContent and
 * isError as sent, so a client that worked against the upstream works through the gateway.
 * Nothing else of the upstream's answer is passed on (its `_meta` could claim one of this
 * gateway's own keys, such as the tool-error code).
 */
export function asCallerSees(answer: Record<string, unknown>): ToolResult {
  return {
    content: answer.content as ToolResult['content'],
    ...(answer.structuredContent !== undefined &&
    answer.structuredContent !== null &&
    typeof answer.structuredContent === 'object'
      ? { structuredContent: answer.structuredContent as Record<string, unknown> }
      : {}),
    ...(answer.isError === true ? { isError: true } : {}),
  };
}
