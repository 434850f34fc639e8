import type { ResourceServer } from 'oidc-provider';
import { SIGNING_ALG } from './signing-key.ts';

/** The scopes the dev IdP grants for its resource servers (the contract's list). */
export const RESOURCE_SCOPES = [
  'env:provision',
  'reports:run',
  'records:write',
  'tasks:admin',
  'audit:read',
] as const;

/** Scopes that are never granted unless asked for: administration and audit access. */
export const PRIVILEGED_SCOPES: readonly string[] = ['tasks:admin', 'audit:read'];

/** What a user token carries when no scope is requested: everything but administration. */
export const DEFAULT_USER_SCOPES: readonly string[] = RESOURCE_SCOPES.filter(
  (s) => !PRIVILEGED_SCOPES.includes(s),
);

/** Resource indicators (RFC 8707) of the stack; each becomes a JWT access token audience. */
export interface Resources {
  /** The gateway's MCP endpoint, e.g. http://127.0.0.1:3000/mcp. */
  gateway: string;
  /** The worker service, the audience of task-bound delegations. */
  worker: string;
  /** The demo downstream system. */
  downstream: string;
  /** Audiences of further downstream targets (the loaded packs' TARGETS_FILE). */
  targets?: readonly string[];
  /** Audiences of upstream MCP servers (UPSTREAMS_FILE): the gateway and the worker exchange for them. */
  upstreams?: readonly string[];
  /**
   * The scopes granted for these resources: the loaded packs' tool scopes plus `tasks:admin`
   * and `audit:read` (default: the contract's list, RESOURCE_SCOPES).
   */
  scopes?: readonly string[];
}

export function isKnownResource(resources: Resources, value: string): boolean {
  return (
    value === resources.gateway ||
    value === resources.worker ||
    value === resources.downstream ||
    (resources.targets ?? []).includes(value) ||
    (resources.upstreams ?? []).includes(value)
  );
}

/** Every resource indicator this IdP issues tokens for. */
export function knownResources(resources: Resources): string[] {
  return [
    resources.gateway,
    resources.worker,
    resources.downstream,
    ...(resources.targets ?? []),
    ...(resources.upstreams ?? []),
  ];
}

export function scopesOf(resources: Resources): readonly string[] {
  return resources.scopes ?? RESOURCE_SCOPES;
}

/** What a user token carries when no scope is requested: everything but administration. */
export function defaultUserScopes(resources: Resources): string[] {
  return scopesOf(resources).filter((s) => !PRIVILEGED_SCOPES.includes(s));
}

/**
 * The resource each service client operates. A client may exchange a token issued for the
 * resource it operates (the gateway exchanges tokens sent to the gateway), besides tokens
 * issued to itself.
 */
export function resourceServedBy(resources: Resources, clientId: string): string | undefined {
  if (clientId === 'mcp-gateway') return resources.gateway;
  if (clientId === 'mcp-worker') return resources.worker;
  return undefined;
}

/**
 * Per client, the resources it may obtain by token exchange (RFC 8693 `resource` or
 * `audience`). A client not named may exchange for any known resource. The defaults pin the
 * two service clients to their one hop each: the gateway to task-bound delegations for the
 * worker, the worker to the downstream targets; so a worker holding a delegation cannot trade it for
 * a token of the gateway (or of anything else it was not given).
 */
export type ExchangeTargets = Readonly<Record<string, readonly string[]>>;

export function defaultExchangeTargets(resources: Resources): Record<string, string[]> {
  return {
    // The gateway: delegations for the worker, and the upstreams for proxied instant calls.
    'mcp-gateway': [resources.worker, ...(resources.upstreams ?? [])],
    // The worker's targets: the demo downstream, the loaded packs' (TARGETS_FILE), the upstreams.
    'mcp-worker': [
      resources.downstream,
      ...(resources.targets ?? []),
      ...(resources.upstreams ?? []),
    ],
  };
}

export function splitScope(scope: string | undefined): string[] {
  return [...new Set((scope ?? '').split(' ').filter(Boolean))];
}

/** How oidc-provider issues tokens for a known resource: ES256 JWTs (RFC 9068). */
export function resourceServerInfo(
  resources: Resources,
  resource: string,
  accessTokenTtl: number,
): ResourceServer | undefined {
  if (!isKnownResource(resources, resource)) return undefined;
  return {
    scope: scopesOf(resources).join(' '),
    accessTokenTTL: accessTokenTtl,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: SIGNING_ALG } },
  };
}
