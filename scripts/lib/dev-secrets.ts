import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Secrets of the local development stack, generated at first start, never committed. */
export interface DevSecrets {
  /** OAuth client secrets of the dev IdP's confidential clients. */
  clientSecrets: Record<DevClient, string>;
  /** Bearer token for the dev IdP's admin API (idp:user). */
  idpAdminToken: string;
  /** AES-256 key (base64) for credentials stored at rest. */
  credentialKey: string;
}

export const DEV_CLIENTS = ['mcp-agent', 'mcp-agent-2', 'mcp-gateway', 'mcp-worker'] as const;
export type DevClient = (typeof DEV_CLIENTS)[number];

const secret = () => randomBytes(24).toString('base64url');

export function generateDevSecrets(): DevSecrets {
  return {
    clientSecrets: Object.fromEntries(DEV_CLIENTS.map((c) => [c, secret()])) as Record<
      DevClient,
      string
    >,
    idpAdminToken: secret(),
    credentialKey: randomBytes(32).toString('base64'),
  };
}

/** Reads `<dataDir>/dev-secrets.json`, creating it (mode 0600) on first use. */
export async function loadOrCreateDevSecrets(dataDir: string): Promise<DevSecrets> {
  const file = path.join(dataDir, 'dev-secrets.json');
  try {
    return JSON.parse(await readFile(file, 'utf8')) as DevSecrets;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const secrets = generateDevSecrets();
  await mkdir(dataDir, { recursive: true });
  // 'wx': if another process created it in the meantime, use theirs.
  try {
    await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600, flag: 'wx' });
    return secrets;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return JSON.parse(await readFile(file, 'utf8')) as DevSecrets;
  }
}

/** Where the local stack keeps its state: `.data/` at the repository root unless DATA_DIR. */
export function dataDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.DATA_DIR ?? path.join(import.meta.dirname, '..', '..', '.data'));
}
