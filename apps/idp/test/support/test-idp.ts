import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as client from 'openid-client';
import { decodeJwt, decodeProtectedHeader, type JWTPayload } from 'jose';
import { createLogger } from '@mtg/log';
import { generateDevSecrets, type DevSecrets } from '@mtg/dev-secrets';
import { startIdp, type Idp, type StartIdpOptions } from '../../src/create-idp.ts';
import { DEV_USER_GRANT, TOKEN_EXCHANGE_GRANT } from '../../src/grant-types.ts';
import type { Resources } from '../../src/resources.ts';

export const RESOURCES: Resources = {
  gateway: 'http://127.0.0.1:3999/mcp',
  worker: 'urn:mcp-task-gateway:worker',
  downstream: 'http://127.0.0.1:9599',
};

export interface TestIdp {
  idp: Idp;
  issuer: string;
  url: string;
  dataDir: string;
  secrets: DevSecrets;
  /** An openid-client configuration for one of the static clients (basic auth). */
  client(clientId: keyof DevSecrets['clientSecrets']): Promise<client.Configuration>;
  close(): Promise<void>;
}

/**
 * The real dev IdP, in process, on 127.0.0.1 port 0, with a temporary data dir (removed on
 * close unless the caller passed its own) and freshly generated secrets.
 */
export async function startTestIdp(
  overrides: Partial<StartIdpOptions> & { secrets?: DevSecrets } = {},
): Promise<TestIdp> {
  const ownDir = !overrides.dataDir;
  const dataDir = overrides.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'mtg-idp-test-')));
  const secrets = overrides.secrets ?? generateDevSecrets();
  const running = await startIdp({
    port: 0,
    host: '127.0.0.1',
    dataDir,
    clientSecrets: secrets.clientSecrets,
    adminToken: secrets.idpAdminToken,
    resources: RESOURCES,
    accessTokenTtl: 3600,
    logger: createLogger('idp', { silent: true }),
    ...overrides,
  });
  const issuer = running.idp.issuer;
  return {
    idp: running.idp,
    issuer,
    url: running.url,
    dataDir,
    secrets,
    client: (clientId) =>
      client.discovery(
        new URL(issuer),
        clientId,
        undefined,
        client.ClientSecretBasic(secrets.clientSecrets[clientId]),
        { execute: [client.allowInsecureRequests] },
      ),
    async close() {
      await running.close();
      if (ownDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export function devUserToken(
  config: client.Configuration,
  params: Record<string, string>,
): Promise<client.TokenEndpointResponse> {
  return client.genericGrantRequest(config, DEV_USER_GRANT, params);
}

export function exchangeToken(
  config: client.Configuration,
  params: Record<string, string>,
): Promise<client.TokenEndpointResponse> {
  return client.genericGrantRequest(config, TOKEN_EXCHANGE_GRANT, params);
}

/** The OAuth error a grant request failed with, or a thrown error if it succeeded. */
export async function oauthError(
  request: Promise<unknown>,
): Promise<{ error: string; error_description?: string; status: number }> {
  try {
    await request;
  } catch (error) {
    if (error instanceof client.ResponseBodyError) {
      return {
        error: error.error,
        error_description: error.error_description,
        status: error.status,
      };
    }
    // A 401 answer carries its error in the body and in a WWW-Authenticate challenge.
    if (error instanceof client.WWWAuthenticateChallengeError) {
      const body = (await error.response.json()) as { error: string; error_description?: string };
      return { ...body, status: error.status };
    }
    throw error;
  }
  throw new Error('expected the request to fail');
}

export function decode(token: string): {
  header: Record<string, unknown>;
  payload: JWTPayload & Record<string, unknown>;
} {
  return {
    header: decodeProtectedHeader(token),
    payload: decodeJwt<Record<string, unknown>>(token),
  };
}

export function admin(
  idp: TestIdp,
  action: 'disable' | 'enable',
  body: unknown,
  /** null: send no Authorization header. */
  token: string | null = idp.secrets.idpAdminToken,
): Promise<Response> {
  return fetch(`${idp.url}/admin/users/${action}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify(body),
  });
}
