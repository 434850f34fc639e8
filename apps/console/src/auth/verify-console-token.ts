import { jwtVerify, type JWTVerifyGetKey } from 'jose';
import type { ConsolePrincipal } from '../http/session-store.ts';
import { roleOf } from './roles.ts';

export type VerifyConsoleTokenResult =
  | { ok: true; principal: ConsolePrincipal }
  | { ok: false; code: 'invalid_token' | 'no_tenant'; message: string };

/**
 * The access token the login returned, checked as the gateway checks it (signature, issuer,
 * audience, `at+jwt`): the console's roles come from its scopes and its tenant claim only.
 */
export async function verifyConsoleToken(
  token: string,
  deps: { keys: JWTVerifyGetKey; issuer: string; audience: string },
): Promise<VerifyConsoleTokenResult> {
  let payload;
  try {
    ({ payload } = await jwtVerify(token, deps.keys, {
      issuer: deps.issuer,
      audience: deps.audience,
      typ: 'at+jwt',
      requiredClaims: ['sub', 'exp'],
    }));
  } catch (error) {
    return { ok: false, code: 'invalid_token', message: (error as Error).message };
  }
  if (typeof payload.tenant !== 'string' || !payload.tenant) {
    return { ok: false, code: 'no_tenant', message: 'the token names no tenant' };
  }
  const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
  return {
    ok: true,
    principal: {
      subject: payload.sub!,
      tenant: payload.tenant,
      client: typeof payload.client_id === 'string' ? payload.client_id : '',
      role: roleOf(scopes),
      scopes,
      accessToken: token,
      expiresAt: payload.exp!,
      ...(typeof payload.iat === 'number' ? { issuedAt: payload.iat } : {}),
    },
  };
}
