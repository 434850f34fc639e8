import { z } from 'zod';
import {
  DEFAULT_LIMITS,
  ToolError,
  type Json,
  type LongTool,
  type TaskContext,
  type ToolResult,
  type AskAnswer,
  type AskQuestion,
  type UpstreamQuestion,
  type UpstreamTaskClient,
  type UpstreamTaskRef,
  type UpstreamTaskState,
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

/** How often a plain upstream call that reports no progress says how long it has run. */
const ELAPSED_EVERY_MS = 3000;

/** `42 s`, `3 min 5 s`, `2 h 10 min`. */
function elapsed(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

const POLL_MIN_MS = 200;
const POLL_MAX_MS = 30_000;

/**
 * An upstream tool as a durable task. With upstream task support, step `upstream:create`
 * journals the upstream task id, its MCP session and its task wire, then the run polls
 * `tasks/get` (at the upstream's interval), mirrors its status and status message, relays a
 * question the upstream task asks to our caller and the answer back (`relay`), and fetches
 * the result (`tasks/result`, or inline on 2026-07-28); a resumed run polls the same upstream
 * task on the same wire. Without it, step `upstream:call` is one
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

  /**
   * One plain `tools/call`, its progress our task's: the status says what is called where at
   * once, then how long it has run until the upstream reports progress, whose messages (or
   * counts, when it sends no message) are forwarded as they come.
   */
  async function plainCall(ctx: TaskContext, client: UpstreamTaskClient, args: Json) {
    const calling = `calling ${entry.upstreamName} on ${upstream.name}`;
    const began = performance.now();
    let reported = false;
    const report = (current: number, total: number, message: string) => {
      void ctx.progress(current, total, message.slice(0, 500)).catch(() => {});
    };
    report(0, 0, calling);
    const ticker = setInterval(() => {
      if (!reported) report(0, 0, `${calling} (${elapsed(performance.now() - began)})`);
    }, ELAPSED_EVERY_MS);
    ticker.unref();
    try {
      return await client.callTool(entry.upstreamName, args, {
        idempotencyKey: `task-${ctx.taskId}`,
        onProgress: (current, total, message) => {
          reported = true;
          report(
            current,
            total ?? 0,
            message ?? `${calling}: ${current}${total ? ` of ${total}` : ''}`,
          );
        },
      });
    } finally {
      clearInterval(ticker);
    }
  }

  async function run(ctx: TaskContext, client: UpstreamTaskClient, args: Json): Promise<Json> {
    const idempotencyKey = `task-${ctx.taskId}`;
    if (!useUpstreamTasks) {
      const result = await ctx.step('upstream:call', () => plainCall(ctx, client, args));
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
    // Questions relayed so far (journaled), and whether this input_required spell was asked
    // what it needs: once per spell, so an upstream whose input comes another way (its own
    // UI, an operator) is polled as before, not asked on every poll.
    const answered: string[] = [];
    let probed = false;
    try {
      let message: string | undefined;
      let interval = ref.pollIntervalMs ?? 1000;
      for (;;) {
        const state = await client.getTask(ref);
        const said =
          state.status === 'input_required'
            ? `upstream task needs input: ${state.statusMessage ?? ''}`.trim()
            : state.statusMessage;
        // Our task's status follows the upstream's: input_required while it waits (for input
        // that is not relayed), working again when it goes on.
        const mirror = () =>
          state.status === 'input_required' || state.status === 'working'
            ? (ctx.inputRequired?.(
                state.status === 'input_required' ? said!.slice(0, 500) : null,
                downstream,
              ) ?? Promise.resolve())
            : Promise.resolve();
        if (state.status !== 'input_required') probed = false;
        else if (!probed) {
          probed = true;
          const relayed = await relay(ctx, client, ref, state, answered, mirror);
          if (relayed) {
            probed = false;
            // The upstream takes the answer in; a poll at once could still see it waiting.
            await ctx.sleep(POLL_MIN_MS);
            continue;
          }
        }
        await mirror();
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

// Thrown (an Error, as throws are) out of the journaled step that found nothing to ask.
const NO_QUESTION = new Error('no upstream question');
/** How long a 2025-11-25 upstream is given to send its question on tasks/result. */
const QUESTION_WAIT_MS = 2000;

/**
 * The upstream task's question, relayed: journaled as step `upstream:question:<n>` (with the
 * upstream's request id or key), asked of our caller with ctx.ask (the task parks until the
 * owner answers, on any wire), and the answer sent to the upstream on its wire as step
 * `upstream:answer:<n>`, so a resumed run neither asks twice nor sends twice. False when the
 * upstream asks nothing this gateway can relay.
 */
async function relay(
  ctx: TaskContext,
  client: UpstreamTaskClient,
  ref: UpstreamTaskRef,
  state: UpstreamTaskState,
  answered: string[],
  mirror: () => Promise<void>,
): Promise<boolean> {
  const n = answered.length + 1;
  const question = await ctx
    .step(`upstream:question:${n}`, async () => {
      // The task shows input_required at once, while the upstream is asked what it needs
      // (up to QUESTION_WAIT_MS on 2025-11-25); a replayed question skips this.
      await mirror();
      const q = await client.question(ref, state, { answered, waitMs: QUESTION_WAIT_MS });
      // Nothing is journaled without a question: the next spell asks again.
      if (!q) throw NO_QUESTION;
      return q as unknown as Json & Record<string, unknown>;
    })
    .catch((error: unknown) => {
      if (error === NO_QUESTION) return undefined;
      throw error;
    });
  if (!question) return false;
  const q = question as unknown as UpstreamQuestion;
  answered.push(q.key);
  const form = formOf(q.requestedSchema);
  const answer: AskAnswer = form
    ? await ctx.ask({ message: q.message || 'The upstream asks for input', schema: form })
    : // A form this gateway cannot show (nested, arrays): the upstream is told no.
      { action: 'decline' };
  await ctx.step(`upstream:answer:${n}`, async () => {
    await client.answer(ref, q, answer);
    return { action: answer.action, ...(form ? {} : { unsupportedForm: true }) };
  });
  return true;
}

/**
 * The upstream's requestedSchema as the flat form ctx.ask takes: string, number, integer and
 * boolean fields, a titled single-select (`oneOf` of `const`/`title`) as `enum` + `enumNames`;
 * undefined when a field is none of these.
 */
export function formOf(schema: Record<string, unknown>): AskQuestion['schema'] | undefined {
  const props = schema.properties;
  if (schema.type !== 'object' || !props || typeof props !== 'object') return undefined;
  const KEEP = [
    'title',
    'description',
    'minLength',
    'maxLength',
    'format',
    'enum',
    'enumNames',
    'default',
    'minimum',
    'maximum',
  ];
  const properties: AskQuestion['schema']['properties'] = {};
  for (const [name, f] of Object.entries(props as Record<string, Record<string, unknown>>)) {
    if (!f || typeof f !== 'object') return undefined;
    const choices = (f.oneOf ?? f.anyOf) as Array<{ const?: unknown; title?: unknown }> | undefined;
    const type = f.type ?? (choices ? 'string' : undefined);
    if (type !== 'string' && type !== 'number' && type !== 'integer' && type !== 'boolean')
      return undefined;
    const field: Record<string, unknown> = { type };
    for (const k of KEEP) if (f[k] !== undefined) field[k] = f[k];
    if (choices) {
      if (
        type !== 'string' ||
        !Array.isArray(choices) ||
        !choices.every((c) => typeof c?.const === 'string')
      )
        return undefined;
      field.enum = choices.map((c) => c.const);
      field.enumNames = choices.map((c) =>
        typeof c.title === 'string' ? c.title : String(c.const),
      );
    }
    properties[name] = field as AskQuestion['schema']['properties'][string];
  }
  const required = Array.isArray(schema.required)
    ? (schema.required as unknown[]).filter((r): r is string => typeof r === 'string')
    : undefined;
  return { type: 'object', properties, ...(required ? { required } : {}) };
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
