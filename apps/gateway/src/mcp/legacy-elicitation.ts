import type { Response } from 'express';
import type { Logger } from '@mtg/log';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type Dispatch } from './dispatch.ts';

/**
 * 2025-11-25 questions: the gateway is stateless, so the `elicitation/create` it sends on a
 * `tasks/result` stream carries its task and question in its JSON-RPC id, and the client's
 * answer (a JSON-RPC response POSTed on its own, to any replica) is recorded from that id
 * alone, for the caller who sends it: the task service authorizes the answer like any verb.
 */
const ANSWER_ID = /^mtg-input:([0-9a-f]{32}):(ask:\d+)$/;

export const elicitationId = (taskId: string, key: string) => `mtg-input:${taskId}:${key}`;

/** Whether `body` is the client's answer to one of our questions (then it is handled). */
export async function answerFromResponse(
  body: unknown,
  res: Response,
  deps: { dispatch: Dispatch; request: RequestContext; logger: Logger },
): Promise<boolean> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const m = body as { id?: unknown; method?: unknown; result?: unknown; error?: unknown };
  if (m.method !== undefined || typeof m.id !== 'string') return false;
  const id = ANSWER_ID.exec(m.id);
  if (!id || (m.result === undefined && m.error === undefined)) return false;
  const [, taskId, key] = id as unknown as [string, string, string];
  if (m.result !== undefined) {
    const r = await deps.dispatch.tasks.answer(
      taskId,
      callContextFrom(deps.request, undefined, 'core-2025'),
      { key, response: stripMeta(m.result) },
    );
    // Refused (it does not fit the form, or the caller does not own the task): the task
    // keeps waiting, and the next tasks/result asks again. A response has no answer of its own.
    if (!r.ok) deps.logger.info('elicitation answer refused', { taskId, key, code: r.code });
  }
  // A client that could not ask (no handler, an error of its own) leaves the task waiting.
  res.status(202).end();
  return true;
}

const stripMeta = (result: unknown) => {
  if (typeof result !== 'object' || result === null) return result;
  const { _meta, ...rest } = result as Record<string, unknown>;
  void _meta;
  return rest;
};
