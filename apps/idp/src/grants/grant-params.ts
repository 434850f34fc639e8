import { errors } from 'oidc-provider';
import type { ResourceServer } from 'oidc-provider';
import { isIdentifier } from '../account-id.ts';
import { knownResources, resourceServerInfo, type Resources } from '../resources.ts';

/** Token endpoint parameters arrive as strings, or arrays when a parameter may repeat. */
export type ParamValue = string | string[] | undefined;

/** At most one value of a parameter that may be repeated on the wire. */
export function oneValue(name: string, value: ParamValue): string | undefined {
  if (Array.isArray(value)) {
    if (value.length > 1) throw new errors.InvalidTarget(`only one ${name} value is supported`);
    return value[0] || undefined;
  }
  return value || undefined;
}

export function requireIdentifier(name: string, value: unknown): string {
  if (value === undefined || value === '') throw new errors.InvalidRequest(`${name} is required`);
  if (!isIdentifier(value)) {
    throw new errors.InvalidRequest(
      `${name} must be 1-128 characters of letters, digits and . _ @ + - (starting with a letter or digit)`,
    );
  }
  return value;
}

/** Seconds as a decimal integer in [1, max]. */
export function parseTtl(value: unknown, max: number): number | undefined {
  if (value === undefined || value === '') return undefined;
  const ttl = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(ttl) || ttl < 1 || ttl > max) {
    throw new errors.InvalidRequest(`ttl must be an integer number of seconds from 1 to ${max}`);
  }
  return ttl;
}

export interface Target {
  resource: string;
  resourceServer: ResourceServer;
}

export function resolveTarget(
  resources: Resources,
  resource: string,
  accessTokenTtl: number,
  label = 'resource',
): Target {
  const resourceServer = resourceServerInfo(resources, resource, accessTokenTtl);
  if (!resourceServer) {
    throw new errors.InvalidTarget(
      `unknown ${label} ${JSON.stringify(resource)}; known: ${knownResources(resources).join(', ')}`,
    );
  }
  return { resource, resourceServer };
}
