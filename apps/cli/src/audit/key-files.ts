import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { JSONWebKeySet, JWK } from 'jose';
import { CliError } from './database.ts';

/** Reads a JWKS file ({"keys": [...]}) of checkpoint public keys. */
export async function readJwks(file: string): Promise<JSONWebKeySet> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(
      `cannot read the public keys ${file}: ${(error as NodeJS.ErrnoException).code}`,
    );
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    throw new CliError(`${file} is not JSON (expected a JWKS: {"keys": [...]})`);
  }
  const keys = (jwks as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.some((k) => !k || typeof k !== 'object')) {
    throw new CliError(`${file} is not a JWKS (expected {"keys": [...]})`);
  }
  if (keys.some((k) => typeof (k as JWK).d === 'string')) {
    throw new CliError(
      `${file} contains a private key: a JWKS for verifiers must hold public keys only`,
    );
  }
  return { keys: keys as JWK[] };
}

/** Adds a public key to a JWKS file (created if missing); a key already there is kept as is. */
export async function addToJwks(file: string, publicJwk: JWK): Promise<void> {
  let jwks: JSONWebKeySet = { keys: [] };
  try {
    await stat(file);
    jwks = await readJwks(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (jwks.keys.some((k) => k.kid === publicJwk.kid)) return;
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify({ keys: [...jwks.keys, publicJwk] }, null, 2) + '\n', {
    mode: 0o644,
  });
  await rename(tmp, file);
}

/** Writes a private JWK to a new file, readable by its owner only. Refuses to overwrite. */
export async function writePrivateKey(file: string, jwk: JWK): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    await writeFile(file, JSON.stringify(jwk, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new CliError(`${file} exists: a signing key is never overwritten (move it away first)`);
    }
    throw error;
  }
  await chmod(file, 0o600); // whatever the umask
}
