import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';

export const SIGNING_ALG = 'ES256';

/** The IdP's private signing key as a JWK (with kid, alg and use). */
export type SigningJwk = JWK & { kid: string; alg: typeof SIGNING_ALG; use: 'sig' };

async function generateSigningJwk(): Promise<SigningJwk> {
  const { privateKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(jwk);
  return { ...jwk, kid, alg: SIGNING_ALG, use: 'sig' };
}

/**
 * Reads the ES256 key at `file`, generating it (mode 0600) on first start so tokens stay
 * verifiable across restarts.
 */
export async function loadOrCreateSigningKey(file: string): Promise<SigningJwk> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as SigningJwk;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const jwk = await generateSigningJwk();
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    // 'wx': if another process created the key in the meantime, use theirs.
    await writeFile(file, JSON.stringify(jwk, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    return jwk;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return JSON.parse(await readFile(file, 'utf8')) as SigningJwk;
  }
}

/** The public half of a signing JWK, as published in the JWKS. */
export function publicJwk(jwk: SigningJwk): JWK {
  const { d: _d, ...rest } = jwk;
  return rest;
}
