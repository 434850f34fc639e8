import { parse } from 'cookie';
import type { Request, Response } from 'express';

export const SESSION_COOKIE = 'mtg_console';

/** A cookie's value, decoded as res.cookie encoded it (the `cookie` package, as Express uses). */
export function cookieOf(req: Request, name: string): string | undefined {
  return parse(req.headers.cookie ?? '')[name];
}

/**
 * The session cookie: httpOnly (no script reads it), Secure (never over plain http, except
 * that browsers treat loopback as secure), SameSite=Lax (sent on the IdP's redirect back,
 * not on cross-site POSTs; forms also need the CSRF token).
 */
export function setSessionCookie(res: Response, id: string, maxAgeSeconds: number): void {
  res.cookie(SESSION_COOKIE, id, {
    httpOnly: true,
    secure: true,
    sameSite: 'lax',
    path: '/',
    maxAge: Math.max(0, maxAgeSeconds) * 1000,
  });
}

export function clearSessionCookie(res: Response): void {
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, secure: true, sameSite: 'lax', path: '/' });
}
