import type { NextFunction, Request, Response } from 'express';
import type { Principal } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { principalOf, refuseToken } from './authenticate.ts';

/**
 * Which verified principals the gateway still refuses (docs/identity.md, "Who may call the
 * gateway"): its own service clients never call it on a user's behalf, and a delegated token
 * (RFC 8693 `act`) is what a service holds after an exchange, never what an agent holds.
 */
export interface PrincipalAdmission {
  /** OAuth clients of this deployment's own services (the gateway's, the workers'). */
  serviceClients: readonly string[];
  /** `refuse`: a token with an `act` claim is refused; `accept`: it is served. */
  delegatedTokens: 'refuse' | 'accept';
}

export type ServicePrincipalRefusal = {
  code: 'token_service_client' | 'token_delegated';
  description: string;
};

/** Why `principal` may not call the gateway, or undefined when it may. */
export function refusalOf(
  principal: Pick<Principal, 'client' | 'actor'>,
  admission: PrincipalAdmission,
): ServicePrincipalRefusal | undefined {
  if (admission.serviceClients.includes(principal.client)) {
    return {
      code: 'token_service_client',
      description: 'tokens of the gateway’s own service clients are not accepted here',
    };
  }
  if (principal.actor && admission.delegatedTokens === 'refuse') {
    return {
      code: 'token_delegated',
      description: 'delegated tokens (with an "act" claim) are not accepted here',
    };
  }
  return undefined;
}

/**
 * After authenticate: a laundered delegation (a worker exchanging a task's delegation for
 * this resource) verifies like any token, so it is refused here by who holds it, with 401
 * `invalid_token`, and reported through `onDenied` (audited, counted).
 */
export function refuseServicePrincipals(
  options: PrincipalAdmission & {
    resourceMetadataUrl: string;
    logger: Logger;
    onDenied: (res: Response, principal: Principal, code: string) => void;
  },
) {
  return (_req: Request, res: Response, next: NextFunction) => {
    const principal = principalOf(res);
    const refusal = refusalOf(principal, options);
    if (!refusal) return next();
    options.logger.info('service principal refused', {
      correlationId: res.locals.correlationId as string | undefined,
      code: refusal.code,
      client: principal.client,
    });
    options.onDenied(res, principal, refusal.code);
    refuseToken(res, options.resourceMetadataUrl, refusal.description);
  };
}
