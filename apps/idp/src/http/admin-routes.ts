import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import type { Logger } from '@mtg/log';
import { IDENTIFIER } from '../account-id.ts';
import type { SecurityEventTransmitter } from '../ssf/push-security-events.ts';
import type { UserStore } from '../user-store.ts';

const UserBody = z.object({
  sub: z.string().regex(IDENTIFIER, 'must be 1-128 letters, digits and . _ @ + -'),
  tenant: z.string().regex(IDENTIFIER, 'must be 1-128 letters, digits and . _ @ + -'),
});

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Compares in constant time whatever the lengths (both sides hashed first). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  const given = digest(match?.[1] ?? '');
  return timingSafeEqual(given, digest(token)) && !!match;
}

/**
 * `POST /admin/users/disable|enable` with `{ sub, tenant }` and the admin bearer token.
 * The change is made first; the Shared Signals push that follows is reported, and a failed
 * push does not undo it.
 */
export function adminRoutes(deps: {
  adminToken: string;
  users: UserStore;
  transmitter: SecurityEventTransmitter;
  logger: Logger;
}): express.Router {
  const { users, transmitter, logger } = deps;
  const router = express.Router();

  router.use('/admin', (req: Request, res: Response, next: NextFunction) => {
    res.set('Cache-Control', 'no-store');
    if (!bearerMatches(req.get('authorization'), deps.adminToken)) {
      res
        .status(401)
        .set('WWW-Authenticate', 'Bearer realm="dev-idp-admin"')
        .json({ error: 'unauthorized', error_description: 'admin bearer token required' });
      return;
    }
    next();
  });
  router.use('/admin', express.json({ limit: '10kb' }));

  for (const action of ['disable', 'enable'] as const) {
    router.post(`/admin/users/${action}`, async (req: Request, res: Response) => {
      const parsed = UserBody.safeParse(req.body);
      if (!parsed.success) {
        res.status(400).json({
          error: 'invalid_request',
          error_description: parsed.error.issues
            .map((i) => `${i.path.join('.') || 'body'}: ${i.message}`)
            .join('; '),
        });
        return;
      }
      const key = parsed.data;
      const user = await users.setDisabled(key, action === 'disable');
      logger.info(`user ${action}d`, key);
      const push =
        action === 'disable'
          ? await transmitter.accountDisabled(key)
          : await transmitter.accountEnabled(key);
      res.json({ user, push });
    });
  }

  return router;
}
