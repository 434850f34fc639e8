import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Secrets of the local development stack, generated at first start, never committed. */
export interface DevSecrets {
  /** OAuth client secrets of the dev IdP's confidential clients. */
  clientSecrets: Record<DevClient, string>;
  /** Bearer token for the dev IdP's admin API (idp:user). */
  idpAdminToken: string;
  /** AES-256 key (base64) for credentials stored at rest. */
  credentialKey: string;
  /** Passwords of the database login roles of the gateway, the workers and the downstream. */
  databasePasswords: DatabasePasswords;
}

export const DEV_CLIENTS = ['mcp-agent', 'mcp-agent-2', 'mcp-gateway', 'mcp-worker'] as const;
export type DevClient = (typeof DEV_CLIENTS)[number];

/** The processes that use the database, each under a LOGIN role of its own. */
export const DATABASE_SERVICES = ['gateway', 'worker', 'downstream'] as const;
export type DatabaseService = (typeof DATABASE_SERVICES)[number];
export type DatabasePasswords = Record<DatabaseService, string>;

const secret = () => randomBytes(24).toString('base64url');

export function generateDatabasePasswords(): DatabasePasswords {
  return Object.fromEntries(DATABASE_SERVICES.map((s) => [s, secret()])) as DatabasePasswords;
}

export function generateDevSecrets(): DevSecrets {
  return {
    clientSecrets: Object.fromEntries(DEV_CLIENTS.map((c) => [c, secret()])) as Record<
      DevClient,
      string
    >,
    idpAdminToken: secret(),
    credentialKey: randomBytes(32).toString('base64'),
    databasePasswords: generateDatabasePasswords(),
  };
}

/** Reads `<dataDir>/dev-secrets.json`, creating it (mode 0600) on first use. */
export async function loadOrCreateDevSecrets(dataDir: string): Promise<DevSecrets> {
  const file = path.join(dataDir, 'dev-secrets.json');
  try {
    const existing = JSON.parse(await readFile(file, 'utf8')) as Partial<DevSecrets>;
    if (existing.databasePasswords) return existing as DevSecrets;
    // Written before the stack had database logins: add their passwords, keep the rest.
    const upgraded = { ...existing, databasePasswords: generateDatabasePasswords() };
    const temporary = `${file}.${process.pid}.tmp`;
    await writeFile(temporary, JSON.stringify(upgraded, null, 2), { mode: 0o600 });
    await rename(temporary, file);
    return upgraded as DevSecrets;
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

/**
 * Where the local stack keeps its state: DATA_DIR, else `.data/` in the directory the command
 * runs in (npm runs scripts at the project's root: this repository's, or a team's pack).
 */
export function dataDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.DATA_DIR ?? path.join(process.cwd(), '.data'));
}
