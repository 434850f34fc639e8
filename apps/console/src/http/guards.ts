import { timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@mtg/log';
import type { ConsoleRole } from '../auth/roles.ts';
import type { ReadScope } from '../queries/scope.ts';
import { clearSessionCookie, cookieOf, SESSION_COOKIE } from './cookies.ts';
import { html } from './html.ts';
import { maybeSessionOf, sessionOf, setRequestSession } from './request-session.ts';
import type { ConsolePrincipal, SessionStore } from './session-store.ts';
import { layout } from '../pages/layout.ts';

/**
 * Why the console refuses a request. The console cannot append to the audit trail (its
 * database login reads the views only), so these are logged with their code; actions are
 * refused and audited by the gateway itself.
 */
export type ConsoleDenial =
  'no_session' | 'role_required' | 'csrf_mismatch' | 'invalid_request' | 'principal_revoked';

/**
 * Whether the gateway stopped serving this principal (app.principals, written by its Shared
 * Signals receiver and its admin API): the console reads the same store on every request.
 */
export type RevocationCheck = (p: ConsolePrincipal) => Promise<string | undefined>;

export { sessionOf };

export function principalOf(res: Response): ConsolePrincipal {
  return sessionOf(res).principal!;
}

/** What the principal may read: their tenant; for a user, their own tasks only. */
export function readScopeOf(p: ConsolePrincipal): ReadScope {
  return p.role === 'user' ? { tenant: p.tenant, ownerOnly: p.subject } : { tenant: p.tenant };
}

export function refuse(
  res: Response,
  logger: Logger,
  status: number,
  code: ConsoleDenial,
  message: string,
): void {
  const session = maybeSessionOf(res);
  const p = session?.principal;
  logger.info('console request refused', {
    code,
    status,
    ...(p ? { tenant: p.tenant, subject: p.subject, role: p.role } : {}),
  });
  res
    .status(status)
    .type('html')
    .send(
      layout(
        status === 403 ? 'Not allowed' : 'Refused',
        session,
        html`<p class="bad" data-code="${code}">${message}</p>`,
      ),
    );
}

/**
 * Loads the session from its cookie; a page without one sends the browser to log in. A
 * session of a principal the gateway has revoked (or of a token issued before its last
 * revocation) ends here, on whichever request comes first after the revocation.
 */
export function requireSession(sessions: SessionStore, revoked: RevocationCheck, logger: Logger) {
  return async (req: Request, res: Response, next: NextFunction) => {
    let session;
    let revocation;
    try {
      session = await sessions.get(cookieOf(req, SESSION_COOKIE));
      if (session?.principal) revocation = await revoked(session.principal);
      if (revocation && session) await sessions.end(session.id);
    } catch (error) {
      return next(error);
    }
    if (!session?.principal) {
      if (req.method === 'GET') return res.redirect(303, '/login');
      return res.status(401).type('text').send('not logged in (no_session)');
    }
    if (revocation) {
      const p = session.principal;
      logger.info('console session ended: principal revoked', {
        code: 'principal_revoked',
        revocation,
        tenant: p.tenant,
        subject: p.subject,
        role: p.role,
      });
      clearSessionCookie(res);
      res
        .status(403)
        .type('html')
        .send(
          layout(
            'Logged out',
            undefined,
            html`<p class="bad" data-code="principal_revoked">
                Your access has been revoked; this session has ended.
              </p>
              <p><a href="/login">Log in</a></p>`,
          ),
        );
      return;
    }
    setRequestSession(res, session);
    next();
  };
}

/** The article goes by the role's first sound, not its letter ("a user"). */
const WITH_ARTICLE: Record<ConsoleRole, string> = {
  auditor: 'an auditor',
  operator: 'an operator',
  user: 'a user',
};

export function requireRole(logger: Logger, roles: readonly ConsoleRole[]) {
  return (_req: Request, res: Response, next: NextFunction) => {
    const p = principalOf(res);
    if (roles.includes(p.role)) return next();
    refuse(
      res,
      logger,
      403,
      'role_required',
      `This page is for ${roles.join(' and ')}s; you are logged in as ${WITH_ARTICLE[p.role]}.`,
    );
  };
}

/** Every POST carries the session's CSRF token in the form field `csrf`. */
export function requireCsrf(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const session = maybeSessionOf(res);
    const csrf = (req.body as { csrf?: unknown } | undefined)?.csrf;
    const sent = typeof csrf === 'string' ? Buffer.from(csrf) : Buffer.alloc(0);
    const expected = Buffer.from(session?.csrf ?? '');
    if (expected.length > 0 && sent.length === expected.length && timingSafeEqual(sent, expected)) {
      return next();
    }
    refuse(
      res,
      logger,
      403,
      'csrf_mismatch',
      'The form was not sent from this console session (CSRF token missing or wrong). Reload the page and try again.',
    );
  };
}
