import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { generateSigningJwk, loadSigningKey, SigningKeyError, type SigningKey } from '@mtg/audit';
import { CliError } from './database.ts';
import { addToJwks, writePrivateKey } from './key-files.ts';

export interface SigningKeySource {
  key: SigningKey;
  /** For messages: where the key came from. */
  from: string;
  /** In dev: the JWKS file next to the generated key, kept up to date with its public key. */
  devJwksFile?: string;
  generated: boolean;
}

/** The dev key's place: `<DATA_DIR>/audit/` (git-ignored, like the rest of `.data/`). */
export function devKeyPaths(dataDir: string) {
  const dir = path.join(dataDir, 'audit');
  return { keyFile: path.join(dir, 'signing-key.json'), jwksFile: path.join(dir, 'jwks.json') };
}

/**
 * The checkpoint signing key: AUDIT_SIGNING_KEY (a private Ed25519 JWK) or
 * AUDIT_SIGNING_KEY_FILE (a file holding one, mode 0600). Neither set: the dev key under
 * `<DATA_DIR>/audit/`, generated at first use; refused when NODE_ENV=production, where a key
 * appearing from nowhere would be a silent fallback for a secret.
 */
export async function loadSigningKeySource(env: {
  AUDIT_SIGNING_KEY?: string | undefined;
  AUDIT_SIGNING_KEY_FILE?: string | undefined;
  NODE_ENV?: string | undefined;
  dataDir: string;
}): Promise<SigningKeySource> {
  if (env.AUDIT_SIGNING_KEY && env.AUDIT_SIGNING_KEY_FILE) {
    throw new CliError('set AUDIT_SIGNING_KEY or AUDIT_SIGNING_KEY_FILE, not both');
  }
  if (env.AUDIT_SIGNING_KEY) {
    return {
      key: await parse(env.AUDIT_SIGNING_KEY, 'AUDIT_SIGNING_KEY'),
      from: 'AUDIT_SIGNING_KEY',
      generated: false,
    };
  }
  if (env.AUDIT_SIGNING_KEY_FILE) {
    const file = env.AUDIT_SIGNING_KEY_FILE;
    return { key: await readKeyFile(file, 'AUDIT_SIGNING_KEY_FILE'), from: file, generated: false };
  }
  if (env.NODE_ENV === 'production') {
    throw new CliError(
      'AUDIT_SIGNING_KEY_FILE: is required when NODE_ENV=production (a private Ed25519 JWK; see docs/audit.md)',
    );
  }
  const { keyFile, jwksFile } = devKeyPaths(env.dataDir);
  let generated = false;
  try {
    await stat(keyFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    try {
      await writePrivateKey(keyFile, await generateSigningJwk());
      generated = true;
    } catch (e) {
      // Another run created it in the meantime: use theirs.
      if (!(e instanceof CliError)) throw e;
    }
  }
  const key = await readKeyFile(keyFile, 'the dev signing key');
  await addToJwks(jwksFile, key.publicJwk);
  return { key, from: keyFile, devJwksFile: jwksFile, generated };
}

async function readKeyFile(file: string, what: string): Promise<SigningKey> {
  let mode: number;
  let text: string;
  try {
    mode = (await stat(file)).mode;
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(`${what}: cannot read ${file} (${(error as NodeJS.ErrnoException).code})`);
  }
  // Like ssh: a private key others can read is not one to sign with.
  if ((mode & 0o077) !== 0) {
    throw new CliError(
      `${what}: ${file} is readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`,
    );
  }
  return parse(text, `${what} (${file})`);
}

async function parse(text: string, what: string): Promise<SigningKey> {
  try {
    return await loadSigningKey(text);
  } catch (error) {
    if (error instanceof SigningKeyError) throw new CliError(`${what}: ${error.message}`);
    throw new CliError(`${what}: not a usable Ed25519 key (${(error as Error).message})`);
  }
}
