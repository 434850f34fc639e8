import type { Request, Response } from 'express';

export const SESSION_COOKIE = 'mtg_console';

export function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
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
