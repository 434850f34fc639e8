import type { AuthInfo } from '@modelcontextprotocol/server';
import type { Response } from 'express';
import type { Principal } from '@mtg/identity';
import type { Workload } from '@mtg/policy';

/**
 * Who is calling and how, for one HTTP request: built once by `authenticate` from the verified
 * token (the token is verified and decoded there, once), completed with the workload by
 * `workloadIdentity`, and handed explicitly to the MCP endpoint, dispatch and the task
 * service. Nothing reads it back out of the SDK's `authInfo.extra` or `res.locals`.
 */
export interface RequestContext {
  principal: Principal;
  /** The verified access token's claims (RFC 8705 `cnf` is read from them). */
  claims: Readonly<Record<string, unknown>>;
  /** The caller's access token, held for this request only: exchanged, never stored or forwarded. */
  token: string;
  correlationId: string;
  /** The `Idempotency-Key` header as received (a `_meta` key wins; dispatch checks it). */
  idempotencyKeyHeader?: string | string[];
  /** The TCP peer (a proxy, when there is one). */
  clientIp?: string;
  /** The calling workload, once workloadIdentity has decided it. */
  workload?: Workload;
}

const contexts = new WeakMap<Response, RequestContext>();

/** Sets (or, with the workload, completes) the request's context. */
export function setRequestContext(res: Response, ctx: RequestContext): void {
  contexts.set(res, ctx);
}

/** The request's context; an error when a route reads it before authenticate ran. */
export function requestContextOf(res: Response): RequestContext {
  const ctx = contexts.get(res);
  if (!ctx) throw new Error('request context read before authenticate');
  return ctx;
}

/** The context when the request got one (request logs, denials before authentication). */
export function maybeRequestContextOf(res: Response): RequestContext | undefined {
  return contexts.get(res);
}

/**
 * The SDKs' `authInfo` for this request (they read `req.auth`), carrying the context itself:
 * an MCP server factory gets it back by type, not by a cast out of `extra`.
 */
export class RequestAuthInfo implements AuthInfo {
  readonly token: string;
  readonly clientId: string;
  readonly scopes: string[];
  readonly expiresAt: number;
  readonly context: RequestContext;
  constructor(context: RequestContext) {
    this.context = context;
    this.token = context.token;
    this.clientId = context.principal.client;
    this.scopes = context.principal.scopes;
    this.expiresAt = context.principal.expiresAt;
  }
}

/** The context an SDK handed back as `authInfo`; an error for any other authInfo. */
export function requestContextFromAuthInfo(authInfo: unknown): RequestContext {
  if (!(authInfo instanceof RequestAuthInfo))
    throw new Error('MCP request reached a handler without a verified principal');
  return authInfo.context;
}
