import express, {
  Router,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
} from 'express';
import { z } from 'zod';
import { appendAuditGrouped } from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { ADMIN_SCOPE, restorePrincipal, revokePrincipal, type OnTaskEnded } from '@mtg/tasks';
import { principalOf, refuseScope } from './authenticate.ts';
import { isStorableText, UNSTORABLE_TEXT_MESSAGE } from './storable-text.ts';

// Text PostgreSQL cannot store is the caller's mistake (400), not a driver error (500).
const storable = (s: z.ZodString) => s.refine(isStorableText, UNSTORABLE_TEXT_MESSAGE);
// A blank subject names nobody: revoking " " would record a principal no token carries.
const notBlank = (s: z.ZodString) =>
  s.refine((v) => v.trim().length > 0, 'must not be empty or only whitespace');
const PrincipalBody = z
  .object({
    subject: notBlank(storable(z.string().min(1).max(256))),
    reason: notBlank(storable(z.string().min(1).max(500))).optional(),
  })
  .strict();

/**
 * `POST /admin/principals/revoke|restore` with `{ subject, reason? }`: a tenant administrator
 * (scope `tasks:admin`) stops or resumes the gateway acting for a user of their own tenant.
 * The tenant is always the administrator's — a body cannot name another. Revoking stops the
 * user's open tasks (cancelled, outcome `revoked`); restoring allows new work, and what was
 * cancelled stays cancelled. `authenticate` and `rejectRevoked` are the same gates as /mcp.
 */
export function adminRoutes(deps: {
  pool: Pool;
  logger: Logger;
  resourceMetadataUrl: string;
  /** Gates run before the scope check, in order (origin check, bearer token, revocation). */
  gates: RequestHandler[];
  /** Told about each task a revocation ends here (no live worker held it). */
  onTaskEnded?: OnTaskEnded;
}): Router {
  const { pool, logger } = deps;
  const router = Router();

  const requireAdmin = async (req: Request, res: Response, next: NextFunction) => {
    const p = principalOf(res);
    if (p.scopes.includes(ADMIN_SCOPE)) return next();
    const description = `this operation requires scope ${ADMIN_SCOPE}`;
    await appendAuditGrouped(pool, {
      type: 'auth.denied',
      tenant: p.tenant,
      subject: p.subject,
      client: p.client,
      reason: 'insufficient_scope',
      correlationId: res.locals.correlationId as string | undefined,
      actor: { subject: p.subject, client: p.client, kind: 'user' },
      data: { method: req.method, path: req.path, scope: ADMIN_SCOPE },
    });
    refuseScope(res, deps.resourceMetadataUrl, ADMIN_SCOPE, description);
  };

  const readBody = [
    express.json({ limit: '10kb' }),
    (req: Request, res: Response, next: NextFunction) => {
      const parsed = PrincipalBody.safeParse(req.body);
      if (!parsed.success) {
        res.status(400).json({
          error: 'invalid_request',
          error_description: parsed.error.issues
            .map((i) => `${i.path.join('.') || 'body'}: ${i.message}`)
            .join('; '),
        });
        return;
      }
      res.locals.body = parsed.data;
      next();
    },
  ];

  const sourceOf = (res: Response) => {
    const admin = principalOf(res);
    const body = res.locals.body as z.infer<typeof PrincipalBody>;
    return {
      target: { tenant: admin.tenant, subject: body.subject },
      source: {
        path: 'admin',
        by: { subject: admin.subject, client: admin.client },
        ...(body.reason ? { detail: { note: body.reason } } : {}),
        correlationId: res.locals.correlationId as string,
      },
    };
  };

  router.use('/admin/principals', (_req: Request, res: Response, next: NextFunction) => {
    res.set('Cache-Control', 'no-store');
    next();
  });

  router.post(
    '/admin/principals/revoke',
    ...deps.gates,
    requireAdmin,
    ...readBody,
    async (_req: Request, res: Response) => {
      const { target, source } = sourceOf(res);
      const cancelledTasks = await revokePrincipal(
        pool,
        target,
        source,
        deps.onTaskEnded ? { onTaskEnded: deps.onTaskEnded } : {},
      );
      logger.info('principal revoked by administrator', {
        ...target,
        by: source.by,
        cancelledTasks,
      });
      res.json({ ...target, revoked: true, cancelledTasks });
    },
  );

  router.post(
    '/admin/principals/restore',
    ...deps.gates,
    requireAdmin,
    ...readBody,
    async (_req: Request, res: Response) => {
      const { target, source } = sourceOf(res);
      const restored = await restorePrincipal(pool, target, source);
      logger.info('principal restored by administrator', { ...target, by: source.by, restored });
      res.json({ ...target, revoked: false, restored, cancelledTasks: [] });
    },
  );

  // Malformed JSON and oversized bodies are the caller's mistake, not a 500.
  router.use(
    '/admin/principals',
    (error: Error & { status?: number }, _req: Request, res: Response, next: NextFunction) => {
      if (!error.status || error.status >= 500) return next(error);
      res.status(error.status).json({
        error: 'invalid_request',
        error_description:
          error.status === 413 ? 'request body too large' : 'request body is not valid JSON',
      });
    },
  );
  return router;
}
