import type { Response } from 'express';
import type { Session } from './session-store.ts';

/**
 * The console session a request runs in, as requireSession (or a login/logout route) loaded it
 * from its cookie. Kept by response with typed accessors, not as an untyped `res.locals` entry.
 */
const sessions = new WeakMap<Response, Session>();

/** Records the request's session; none (no or an unknown cookie) leaves it without one. */
export function setRequestSession(res: Response, session: Session | undefined): void {
  if (session) sessions.set(res, session);
  else sessions.delete(res);
}

/** The request's session when it has one (a refusal page, the CSRF check). */
export function maybeSessionOf(res: Response): Session | undefined {
  return sessions.get(res);
}

/** The request's session; an error when a route reads it before its session was loaded. */
export function sessionOf(res: Response): Session {
  const session = sessions.get(res);
  if (!session) throw new Error('console session read before it was loaded');
  return session;
}
