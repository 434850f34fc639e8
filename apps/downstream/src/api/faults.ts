import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';

/**
 * Fault injection for tests, demos and chaos runs: makes the /api of this demo downstream fail,
 * hang or behave, on command. Mounted only when DOWNSTREAM_FAULTS=enabled — never by
 * default, and never meant for anything but the demo server.
 *
 *   POST /_faults { "mode": "fail", "status": 503, "count": 3 }  the next 3 /api requests get 503
 *   POST /_faults { "mode": "hang" }                             /api requests never answer
 *   POST /_faults { "mode": "ok" }                               back to normal
 *   GET  /_faults                                                the mode and what it did
 *
 * Without `count` a mode lasts until the next POST. A hung request is held until its client
 * gives up (or HANG_LIMIT_MS passes, then 504), so it never reaches the handler: nothing it
 * carried is written.
 */
export const faultCommand = z
  .object({
    mode: z.enum(['fail', 'hang', 'ok']),
    status: z.number().int().min(400).max(599).optional(),
    count: z.number().int().min(1).optional(),
  })
  .strict();
export type FaultCommand = z.infer<typeof faultCommand>;

export interface FaultState {
  mode: FaultCommand['mode'];
  status: number;
  /** Requests the mode still affects; null: until changed. */
  remaining: number | null;
  /** /api requests seen since the last command, and how many of them the fault hit. */
  seen: number;
  faulted: number;
}

const HANG_LIMIT_MS = 5 * 60_000;

export function createFaults() {
  let state: FaultState = { mode: 'ok', status: 503, remaining: null, seen: 0, faulted: 0 };
  const held = new Set<Response>();

  /** In front of /api: applies the current fault to each request. */
  const middleware = (req: Request, res: Response, next: NextFunction) => {
    state.seen++;
    if (state.mode === 'ok') return next();
    state.faulted++;
    const mode = state.mode;
    if (state.remaining !== null && --state.remaining <= 0)
      state = { ...state, mode: 'ok', remaining: null };
    if (mode === 'fail') {
      res
        .status(state.status)
        .json({ error: 'injected_fault', error_description: `fault injection: ${state.status}` });
      return;
    }
    held.add(res);
    const timer = setTimeout(() => {
      held.delete(res);
      if (!res.headersSent) res.status(504).json({ error: 'injected_hang' });
    }, HANG_LIMIT_MS);
    timer.unref();
    req.on('close', () => {
      clearTimeout(timer);
      held.delete(res);
    });
  };

  const routes = Router();
  routes.get('/_faults', (_req, res) => {
    res.json(state);
  });
  routes.post('/_faults', express.json({ limit: '4kb' }), (req, res) => {
    const parsed = faultCommand.safeParse(req.body);
    if (!parsed.success) {
      res.status(400).json({
        error: 'invalid_request',
        error_description: parsed.error.issues.map((i) => i.message).join('; '),
      });
      return;
    }
    const c = parsed.data;
    state = {
      mode: c.mode,
      status: c.status ?? 503,
      remaining: c.mode === 'ok' ? null : (c.count ?? null),
      seen: 0,
      faulted: 0,
    };
    res.json(state);
  });

  return { middleware, routes, state: () => state, heldRequests: () => held.size };
}

export type Faults = ReturnType<typeof createFaults>;
