import { z } from 'zod';
import {
  DEFAULT_LIMITS,
  ToolError,
  type Json,
  type LongTool,
  type TaskContext,
  type ToolResult,
  type UpstreamTaskClient,
  type UpstreamTaskRef,
} from '@mtg/tool-kit';
import type { CatalogueEntry } from './catalogue-store.ts';
import type { UpstreamConfig } from './upstream-config.ts';

/** How one upstream tool is served, from its configuration and what the upstream advertised. */
export function resolveMode(upstream: UpstreamConfig, entry: CatalogueEntry): 'instant' | 'task' {
  const mode = upstream.tools[entry.upstreamName]?.mode ?? upstream.mode;
  // A tool that requires a task cannot be called within a request.
  if (entry.taskSupport === 'required') return 'task';
  if (mode === 'auto') return entry.taskSupport === 'forbidden' ? 'instant' : 'task';
  return mode;
}

export function scopeOf(upstream: UpstreamConfig, entry: CatalogueEntry): string {
  return upstream.tools[entry.upstreamName]?.scope ?? upstream.scope;
}

/** The upstream's JSON Schema as a zod schema (arguments are validated by the gateway too). */
export function inputSchemaOf(entry: CatalogueEntry): z.ZodType {
  try {
    return z.fromJSONSchema(entry.inputSchema);
  } catch {
    // A schema zod cannot read is the upstream's to enforce; it still must be an object.
    return z.looseObject({});
  }
}

const POLL_MIN_MS = 200;
const POLL_MAX_MS = 30_000;

/**
 * An upstream tool as a durable task. With upstream task support, step `upstream:create`
 * journals the upstream task id, its MCP session and its task wire, then the run polls
 * `tasks/get` (at the upstream's interval), mirrors its status (input_required included) and
 * status message, and fetches the result (`tasks/result`, or inline on 2026-07-28); a resumed
 * run polls the same upstream task on the same wire. Without it, step `upstream:call` is one
 * `tools/call` with a progress token (at least once: a crash mid-call calls again, with the
 * same key).
 */
export function upstreamLongTool(upstream: UpstreamConfig, entry: CatalogueEntry): LongTool {
  const settings = upstream.tools[entry.upstreamName] ?? {};
  const limits = { ...DEFAULT_LIMITS, ...settings.limits };
  const useUpstreamTasks = entry.taskSupport !== 'forbidden';
  return Object.freeze({
    kind: 'long' as const,
    name: entry.name,
    title: entry.title ?? entry.upstreamName,
    description: entry.description || `${entry.upstreamName} (upstream ${upstream.name})`,
    inputSchema: inputSchemaOf(entry),
    scope: scopeOf(upstream, entry),
    limits,
    origin: {
      pack: `upstream:${upstream.name}`,
      version: entry.fingerprint.slice(0, 12),
      targets: [],
      upstreams: [upstream.name],
    },
    // The task's result is the upstream tool's own CallToolResult, not wrapped in ours.
    returnsToolResult: true,
    summarize: (args: Record<string, unknown>) => ({
      upstream: upstream.name,
      upstreamTool: entry.upstreamName,
      argumentKeys: Object.keys(args ?? {}).slice(0, 20),
    }),
    async execute(ctx: TaskContext, args: Json) {
      const client = ctx.upstream?.(upstream.name);
      if (!client) throw new TypeError(`this worker has no upstream ${upstream.name}`);
      try {
        return await run(ctx, client, args);
      } finally {
        await client.release(undefined);
      }
    },
  });

  async function run(ctx: TaskContext, client: UpstreamTaskClient, args: Json): Promise<Json> {
    const idempotencyKey = `task-${ctx.taskId}`;
    if (!useUpstreamTasks) {
      const result = await ctx.step('upstream:call', () =>
        client.callTool(entry.upstreamName, args, {
          idempotencyKey,
          onProgress: (current, total, message) => {
            void ctx.progress(current, total ?? 0, message).catch(() => {});
          },
        }),
      );
      return resultOf(result);
    }
    const ref = (await ctx.step('upstream:create', async () => {
      const created = await client.createTask(entry.upstreamName, args, {
        idempotencyKey,
        ttlMs: limits.maxDeadlineMs,
      });
      return {
        taskId: created.taskId,
        sessionId: created.sessionId,
        protocolVersion: created.protocolVersion,
        // Which task wire the upstream task lives on: a resumed run continues on it.
        wire: created.wire ?? '2025-11-25',
        pollIntervalMs: created.pollIntervalMs ?? null,
        // A 2026-07-28 upstream may answer at once instead of creating a task.
        ...(created.result ? { result: created.result as unknown as Json } : {}),
      };
    })) as UpstreamTaskRef & { pollIntervalMs: number | null; result?: ToolResult };
    if (ref.result) return resultOf(ref.result);
    const downstream = `upstream:${upstream.name}`;
    try {
      let message: string | undefined;
      let interval = ref.pollIntervalMs ?? 1000;
      for (;;) {
        const state = await client.getTask(ref);
        const said =
          state.status === 'input_required'
            ? `upstream task needs input: ${state.statusMessage ?? ''}`.trim()
            : state.statusMessage;
        // Our task's status follows the upstream's: input_required while it waits, working
        // again when it goes on (the upstream's elicitation itself is not relayed).
        if (state.status === 'input_required' || state.status === 'working') {
          await ctx.inputRequired?.(
            state.status === 'input_required' ? said!.slice(0, 500) : null,
            downstream,
          );
        }
        if (said && said !== message) {
          message = said;
          await ctx.progress(0, 0, said.slice(0, 500));
        }
        if (state.status === 'completed') {
          const result = state.result ?? (await client.taskResult(ref));
          await client.release(ref);
          return resultOf(result);
        }
        if (state.status === 'failed' || state.status === 'cancelled') {
          await client.release(ref);
          throw new ToolError(
            state.status === 'failed' ? 'upstream_task_failed' : 'upstream_task_cancelled',
            `upstream ${upstream.name} task ${ref.taskId} ${state.status}${state.statusMessage ? `: ${state.statusMessage}` : ''}`,
          );
        }
        interval = Math.min(Math.max(state.pollIntervalMs ?? interval, POLL_MIN_MS), POLL_MAX_MS);
        await ctx.sleep(interval);
      }
    } catch (error) {
      // Our task was stopped (cancel, revocation, deadline): the upstream's goes too, and
      // the stop is recorded only after the upstream acknowledged (or the bound passed).
      if (ctx.signal.aborted) await client.cancelTask(ref).catch(() => false);
      throw error;
    }
  }
}

/**
 * The upstream's CallToolResult as our task's result (returnsToolResult): its content,
 * structuredContent and isError as the upstream sent them, so the task's result is what a
 * direct call would have returned. An answer without content is not a result.
 */
function resultOf(result: ToolResult): Json {
  if (!Array.isArray(result?.content)) {
    throw new ToolError(
      'upstream_protocol_error',
      'the upstream answered without a CallToolResult (no content)',
    );
  }
  return {
    content: result.content,
    ...(result.structuredContent ? { structuredContent: result.structuredContent } : {}),
    ...(result.isError === true ? { isError: true } : {}),
  };
}
