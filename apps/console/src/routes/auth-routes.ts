import { nowMs, type Clock } from '@mtg/clock';
import express, { Router, type Request, type Response } from 'express';
import type { JWTVerifyGetKey } from 'jose';
import type { Logger } from '@mtg/log';
import type { OidcClient } from '../auth/oidc-client.ts';
import type { ConsoleRole } from '../auth/roles.ts';
import { verifyConsoleToken } from '../auth/verify-console-token.ts';
import { clearSessionCookie, cookieOf, SESSION_COOKIE, setSessionCookie } from '../http/cookies.ts';
import { requireCsrf, type RevocationCheck } from '../http/guards.ts';
import { sessionOf, setRequestSession } from '../http/request-session.ts';
import { html } from '../http/html.ts';
import type { SessionStore } from '../http/session-store.ts';
import { layout } from '../pages/layout.ts';

// What a login may ask for: a role, or an approver (a user who also asks for the approval
// scopes; the console role is still decided by the granted scopes).
const ROLES: Array<ConsoleRole | 'approver'> = ['auditor', 'operator', 'user', 'approver'];

/**
 * Login by authorization code + PKCE: /login offers the roles, /login/start?role= sends the
 * browser to the IdP asking for that role's scopes, /auth/callback redeems the code and opens
 * a session whose role comes from the scopes the IdP granted, never from the request.
 */
export function authRoutes(deps: {
  oidc: OidcClient;
  sessions: SessionStore;
  keys: JWTVerifyGetKey;
  issuer: string;
  audience: string;
  /** An approver's login: a user's, asking for these scopes too (empty: not offered). */
  approvalScopes: readonly string[];
  /** The console's own address: the callback URL is rebuilt on it, whatever Host said. */
  baseUrl: string;
  /** Whether the gateway has revoked a principal: a revoked one cannot log in. */
  revoked: RevocationCheck;
  logger: Logger;
  /** How long the session cookie lasts (default: the system clock). */
  clock?: Clock;
}): Router {
  const { oidc, sessions, logger } = deps;
  const router = Router();

  router.get('/login', (_req: Request, res: Response) => {
    res.type('html').send(
      layout(
        'Log in',
        undefined,
        html`<p>
            Log in with your identity provider. Pick what you need; your provider decides what you
            are granted, and the console shows only that.
          </p>
          <ul class="logins">
            <li>
              <a href="/login/start?role=auditor" id="login-auditor">Log in as an auditor</a> (scope
              <code>audit:read</code>)
            </li>
            <li>
              <a href="/login/start?role=operator" id="login-operator">Log in as an operator</a>
              (scope <code>tasks:admin</code>)
            </li>
            <li>
              <a href="/login/start?role=user" id="login-user">Log in to see your own tasks</a>
            </li>
            ${
              deps.approvalScopes.length
                ? html`<li>
                    <a href="/login/start?role=approver" id="login-approver"
                      >Log in to approve others' requests</a
                    >
                    (scope <code>${deps.approvalScopes.join(' ')}</code>)
                  </li>`
                : ''
            }
          </ul>`,
      ),
    );
  });

  /**
   * A login replaces the session in the cookie. Over a live session it needs the person's own
   * say (a form with the session's CSRF token), so a plain link to /login/start elsewhere
   * cannot log anyone out; the session it replaces ends in the database too.
   */
  router.get('/login/start', async (req: Request, res: Response) => {
    const role = ROLES.find((r) => r === req.query.role) ?? 'user';
    const current = await sessions.get(cookieOf(req, SESSION_COOKIE));
    if (current?.principal && !(await deps.revoked(current.principal))) {
      const p = current.principal;
      res.type('html').send(
        layout(
          'Log in again?',
          current,
          html`<p>
              You are logged in as ${p.subject} of ${p.tenant} (${p.role}). Logging in again ends
              this session.
            </p>
            <form method="post" action="/login/start">
              <input type="hidden" name="csrf" value="${current.csrf}" />
              <input type="hidden" name="role" value="${role}" />
              <button type="submit" id="login-again">Log out and log in as ${role}</button>
            </form>
            <p><a href="/tasks">Stay logged in</a></p>`,
        ),
      );
      return;
    }
    // A login under way in this browser (or a revoked session) is abandoned: its row goes.
    if (current) await sessions.end(current.id);
    await beginLogin(role, res);
  });

  router.post(
    '/login/start',
    express.urlencoded({ extended: false, limit: '4kb' }),
    async (req: Request, res: Response, next) => {
      setRequestSession(res, await sessions.get(cookieOf(req, SESSION_COOKIE)));
      next();
    },
    requireCsrf(logger),
    async (req: Request, res: Response) => {
      const role =
        ROLES.find((r) => r === (req.body as { role?: unknown } | undefined)?.role) ?? 'user';
      await sessions.end(sessionOf(res).id);
      await beginLogin(role, res);
    },
  );

  async function beginLogin(choice: ConsoleRole | 'approver', res: Response): Promise<void> {
    const role: ConsoleRole = choice === 'approver' ? 'user' : choice;
    let begun;
    try {
      begun = await oidc.begin(role, choice === 'approver' ? deps.approvalScopes : []);
    } catch (error) {
      logger.warn('identity provider unreachable', { error: (error as Error).message });
      res
        .status(502)
        .type('html')
        .send(
          layout(
            'Log in',
            undefined,
            html`<p class="bad">The identity provider cannot be reached; try again shortly.</p>`,
          ),
        );
      return;
    }
    const session = await sessions.startLogin({
      state: begun.state,
      codeVerifier: begun.codeVerifier,
      role,
    });
    setSessionCookie(res, session.id, 600);
    res.redirect(303, begun.url.href);
  }

  router.get('/auth/callback', async (req: Request, res: Response) => {
    const session = await sessions.get(cookieOf(req, SESSION_COOKIE));
    const fail = (status: number, message: string) =>
      res
        .status(status)
        .type('html')
        .send(
          layout(
            'Log in failed',
            undefined,
            html`<p class="bad">${message}</p>
              <p><a href="/login">Log in again</a></p>`,
          ),
        );
    if (!session?.login) return fail(400, 'This login was not started here, or it expired.');
    if (typeof req.query.error === 'string') {
      return fail(
        403,
        `The identity provider refused: ${req.query.error}${typeof req.query.error_description === 'string' ? ` (${req.query.error_description})` : ''}`,
      );
    }
    let token: string;
    try {
      const here = new URL(req.originalUrl, deps.baseUrl);
      token = await oidc.complete(here, session.login);
    } catch (error) {
      logger.info('login refused', { error: (error as Error).message });
      return fail(400, 'The login could not be completed (state or code rejected).');
    }
    const verified = await verifyConsoleToken(token, deps);
    if (!verified.ok) {
      logger.info('login token refused', { code: verified.code, error: verified.message });
      return fail(403, `The token is not usable here (${verified.code}).`);
    }
    // Revoked at the gateway (an IdP's signal, or an administrator): no session here either.
    const revocation = await deps.revoked(verified.principal);
    if (revocation) {
      await sessions.end(session.id);
      logger.info('login refused: principal revoked', {
        code: 'principal_revoked',
        revocation,
        tenant: verified.principal.tenant,
        subject: verified.principal.subject,
      });
      return fail(403, 'Your access has been revoked (principal_revoked).');
    }
    const next = await sessions.establish(session, verified.principal);
    setSessionCookie(
      res,
      next.id,
      verified.principal.expiresAt - Math.floor(nowMs(deps.clock) / 1000),
    );
    logger.info('console login', {
      tenant: verified.principal.tenant,
      subject: verified.principal.subject,
      role: verified.principal.role,
    });
    res.redirect(303, '/tasks');
  });

  router.post(
    '/logout',
    express.urlencoded({ extended: false, limit: '4kb' }),
    async (req: Request, res: Response, next) => {
      setRequestSession(res, await sessions.get(cookieOf(req, SESSION_COOKIE)));
      next();
    },
    requireCsrf(logger),
    async (_req: Request, res: Response) => {
      await sessions.end(sessionOf(res).id);
      clearSessionCookie(res);
      res.redirect(303, '/login');
    },
  );
  return router;
}
