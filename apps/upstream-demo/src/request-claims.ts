import type { Response } from 'express';
import type { JWTPayload } from 'jose';

/** Each request's verified token claims, set by the demo's authenticate for the MCP routes. */
const claimsByResponse = new WeakMap<Response, JWTPayload>();

export function setRequestClaims(res: Response, claims: JWTPayload): void {
  claimsByResponse.set(res, claims);
}

/** The request's verified claims; an error when a route reads them before authenticate ran. */
export function requestClaimsOf(res: Response): JWTPayload {
  const claims = claimsByResponse.get(res);
  if (!claims) throw new Error('token claims read before authenticate');
  return claims;
}
