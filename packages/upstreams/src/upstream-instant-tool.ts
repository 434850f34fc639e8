import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import type { Logger } from '@mtg/log';
import { toolErrorResult, type ToolDefinition, type ToolResult } from '@mtg/tools';
import type { CatalogueEntry } from './catalogue-store.ts';
import { connectUpstream } from './connect-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { isUpstreamError, UpstreamError } from './upstream-error.ts';
import type { UpstreamGuard } from './upstream-guard.ts';
import type { CallLimitDecision } from './upstream-call-limit.ts';
import { inputSchemaOf, scopeOf } from './upstream-long-tool.ts';

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
  ): Promise<string>;
  /** The per-caller limit on proxied calls. */
  limit: (caller: {
    tenant: string;
    subject: string;
    client: string;
  }) => Promise<CallLimitDecision>;
  fetch?: typeof fetch;
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
        durationMs: Date.now() - started,
        argumentKeys: Object.keys((args as Record<string, unknown>) ?? {}).slice(0, 20),
      },
    });
  };
  return {
    name: entry.name,
    title: entry.title ?? entry.upstreamName,
    description: entry.description || `${entry.upstreamName} (upstream ${upstream.name})`,
    inputSchema: inputSchemaOf(entry),
    scope,
    async run({ principal, correlationId, token }, args) {
      const started = Date.now();
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
        const exchanged = deps.exchange(token, upstream.audience, scope);
        exchanged.catch(() => {}); // awaited by the first request, if it gets that far
        const answer = await deps.guard.run(undefined, async () => {
          const connection = await connectUpstream({
            upstream: upstream.name,
            url: upstream.url,
            token: () => exchanged,
            reauthenticate: () => deps.exchange(token, upstream.audience, scope, { fresh: true }),
            maxResponseBytes: upstream.maxResponseBytes,
            timeoutMs,
            ...(deps.fetch ? { fetch: deps.fetch } : {}),
          });
          try {
            return await connection.request(
              'tools/call',
              { name: entry.upstreamName, arguments: args as Record<string, unknown> },
              { timeoutMs },
            );
          } finally {
            await connection.close({ terminate: true });
          }
        });
        if (!Array.isArray(answer.content)) {
          throw new UpstreamError(
            'upstream_protocol_error',
            upstream.name,
            `upstream ${upstream.name} answered tools/call without content`,
          );
        }
        result = answer as unknown as ToolResult;
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
