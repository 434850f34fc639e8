import { Router } from 'express';
import { requireRole } from '../http/guards.ts';
import type { AuditRouteDeps } from './audit-route-deps.ts';
import { chainRoutes } from './chain-routes.ts';
import { denialsRoutes } from './denials-routes.ts';
import { evidenceRoutes } from './evidence-routes.ts';
import { principalRoutes } from './principal-routes.ts';

/** Pages for auditors and operators: denials, principals, revocations, chain health, evidence. */
export function auditRoutes(deps: AuditRouteDeps): Router {
  const router = Router();
  router.use(
    ['/denials', '/principals', '/revocations', '/chain', '/evidence'],
    requireRole(deps.logger, ['auditor', 'operator']),
  );

  router.use(denialsRoutes(deps));
  router.use(principalRoutes(deps));
  router.use(chainRoutes(deps));
  router.use(evidenceRoutes(deps));
  return router;
}
