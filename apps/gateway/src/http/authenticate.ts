import type { NextFunction, Request, Response } from 'express';
import {
  bearerChallenge,
  cachedTokenVerifier,
  extractBearer,
  type Principal,
  type VerifyAccessTokenOptions as VerifyOptions,
} from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { requestContextOf, setRequestContext } from './request-context.ts';

export interface AuthenticateOptions {
  verify: VerifyOptions;
  /** How long a verified token is remembered (AUTH_TOKEN_CACHE_MS); 0 or absent: never. */
  tokenCacheMs?: number;
  resourceMetadataUrl: string;
  logger: Logger;
  /** Reports each denial (the audit writer arrives with the tasks issue). */
  onDenied?: (req: Request, code: string, res: Response) => void;
}

/** The verified principal of this request (set by authenticate). */
export function principalOf(res: Response): Principal {
  return requestContextOf(res).principal;
}

/**
 * 401 for a token this resource will not accept (RFC 6750 `invalid_token`), with the challenge
 * naming the protected resource metadata: a bad token, a revoked principal, a certificate
 * the token is not bound to.
 */
export function refuseToken(res: Response, resourceMetadataUrl: string, description: string) {
  res
    .status(401)
    .set(
      'WWW-Authenticate',
      bearerChallenge({ error: 'invalid_token', description, resourceMetadataUrl }),
    )
    .json({ error: 'invalid_token', error_description: description });
}

/** 403 for a valid token that lacks `scope` (RFC 6750 `insufficient_scope`), naming it. */
export function refuseScope(
  res: Response,
  resourceMetadataUrl: string,
  scope: string,
  description: string,
) {
  res
    .status(403)
    .set(
      'WWW-Authenticate',
      bearerChallenge({
        error: 'insufficient_scope',
        description,
        scope: [scope],
        resourceMetadataUrl,
      }),
    )
    .json({ error: 'insufficient_scope', error_description: description, scope });
}

/**
 * OAuth 2.0 resource-server gate (RFC 6750 / RFC 9728): every request to a protected route
 * carries a bearer token that verifies for this resource, or gets a 401 challenge naming
 * the protected resource metadata.
 */
export function authenticate(options: AuthenticateOptions) {
  const challenge = (
    error: 'invalid_request' | 'invalid_token' | undefined,
    description?: string,
  ) =>
    bearerChallenge({
      ...(error ? { error } : {}),
      ...(description ? { description } : {}),
      resourceMetadataUrl: options.resourceMetadataUrl,
    });

  const verify = cachedTokenVerifier(options.verify, { maxAgeMs: options.tokenCacheMs ?? 0 });
  return async (req: Request, res: Response, next: NextFunction) => {
    const bearer = extractBearer(req.headers.authorization);
    if (!bearer.ok) {
      const malformed = bearer.code === 'malformed';
      options.onDenied?.(req, malformed ? 'token_malformed_header' : 'token_missing', res);
      res
        .status(malformed ? 400 : 401)
        .set(
          'WWW-Authenticate',
          malformed
            ? challenge('invalid_request', 'Authorization header must be "Bearer <token>"')
            : challenge(undefined),
        )
        .json({
          error: malformed ? 'invalid_request' : 'invalid_token',
          error_description: malformed ? 'malformed Authorization header' : 'missing access token',
        });
      return;
    }
    const verified = await verify(bearer.token);
    if (!verified.ok) {
      options.onDenied?.(req, `token_${verified.code}`, res);
      options.logger.info('token rejected', {
        correlationId: res.locals.correlationId as string | undefined,
        code: verified.code,
      });
      if (verified.code === 'keys_unavailable') {
        // Our problem, not the token's: the issuer's keys could not be fetched.
        res.status(503).set('Retry-After', '5').json({
          error: 'temporarily_unavailable',
          error_description: 'signing keys of the authorization server are unavailable',
        });
        return;
      }
      refuseToken(res, options.resourceMetadataUrl, verified.description);
      return;
    }
    // The request's context, built once: every later gate, the MCP endpoint, dispatch and the
    // task service get it from here (http/request-context.ts).
    const idempotencyKeyHeader = req.headers['idempotency-key'];
    setRequestContext(res, {
      principal: verified.principal,
      claims: verified.claims,
      token: bearer.token,
      correlationId: String(res.locals.correlationId ?? ''),
      // An explicit idempotency key may also come as a header (IETF Idempotency-Key draft).
      ...(idempotencyKeyHeader !== undefined ? { idempotencyKeyHeader } : {}),
      ...(req.socket.remoteAddress ? { clientIp: req.socket.remoteAddress } : {}),
    });
    next();
  };
}
