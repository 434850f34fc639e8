import { z } from 'zod';

/**
 * Environment variables for the AES-256-GCM keys of credentials at rest. Spread into the
 * app's config schema (`z.object({ ...credentialKeysEnv, ... }).superRefine(checkCredentialKeys)`)
 * and read the parsed config with `credentialKeysFromConfig`, so a bad key stops the process
 * with a ConfigError naming the variable, like every other setting.
 */

const KEY_BYTES = 32;
const KEY_ID = /^[A-Za-z0-9._-]+$/;
/** The id a single CREDENTIAL_KEY gets. */
const SINGLE_KEY_ID = 'k1';

/** A 32-byte key in standard base64 (padding optional); anything else is refused. */
function decodeKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed, 'base64');
  // Buffer.from skips what it cannot decode: insist the text is exactly the key's encoding.
  if (key.toString('base64').replace(/=+$/, '') !== trimmed.replace(/=+$/, '')) return undefined;
  return key.length === KEY_BYTES ? key : undefined;
}

const MUST_BE_KEY = `must be a ${KEY_BYTES}-byte key, base64-encoded (e.g. \`openssl rand -base64 32\`)`;

const singleKey = () =>
  z.string().refine((s) => decodeKey(s) !== undefined, { message: MUST_BE_KEY });

/** "id1:base64,id2:base64": ids unique, every key 32 bytes. */
const keyList = () =>
  z.string().superRefine((s, ctx) => {
    const entries = s
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    if (entries.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'must list at least one id:base64key entry' });
      return;
    }
    const seen = new Set<string>();
    for (const [n, entry] of entries.entries()) {
      const at = entry.indexOf(':');
      const id = at > 0 ? entry.slice(0, at).trim() : '';
      const where = `entry ${n + 1}`;
      if (!KEY_ID.test(id)) {
        ctx.addIssue({
          code: 'custom',
          message: `${where}: expected id:base64key, the id made of letters, digits, ".", "_" or "-"`,
        });
      } else if (seen.has(id)) {
        ctx.addIssue({ code: 'custom', message: `${where}: key id "${id}" is listed twice` });
      } else if (decodeKey(entry.slice(at + 1)) === undefined) {
        ctx.addIssue({ code: 'custom', message: `${where} ("${id}"): ${MUST_BE_KEY}` });
      }
      seen.add(id);
    }
  });

export const credentialKeysEnv = {
  /** One key (id "k1"). */
  CREDENTIAL_KEY: singleKey().optional(),
  /** Several keys for rotation: "id:base64,…"; the first encrypts unless CREDENTIAL_KEY_CURRENT. */
  CREDENTIAL_KEYS: keyList().optional(),
  /** The id of the key that encrypts; must be one of the keys. */
  CREDENTIAL_KEY_CURRENT: z.string().trim().min(1).optional(),
};

export type CredentialKeysEnv = z.output<z.ZodObject<typeof credentialKeysEnv>>;

function keyIds(config: CredentialKeysEnv): string[] {
  if (config.CREDENTIAL_KEYS) {
    return config.CREDENTIAL_KEYS.split(',')
      .map((e) => e.trim())
      .filter(Boolean)
      .map((e) => e.slice(0, e.indexOf(':')).trim());
  }
  return config.CREDENTIAL_KEY ? [SINGLE_KEY_ID] : [];
}

/** The check across the variables (for the app schema's superRefine): the current key exists. */
export function checkCredentialKeys(config: CredentialKeysEnv, ctx: z.RefinementCtx): void {
  const current = config.CREDENTIAL_KEY_CURRENT;
  if (current === undefined) return;
  const ids = keyIds(config);
  if (ids.length > 0 && !ids.includes(current)) {
    ctx.addIssue({
      code: 'custom',
      path: ['CREDENTIAL_KEY_CURRENT'],
      message: `names no configured key: "${current}" is not among ${ids.map((id) => `"${id}"`).join(', ')}`,
    });
  }
}

/**
 * The key set of a parsed config that includes `credentialKeysEnv` and passed
 * `checkCredentialKeys`: CREDENTIAL_KEYS when set, else CREDENTIAL_KEY as "k1".
 */
export function credentialKeysFromConfig(config: CredentialKeysEnv): {
  keys: Record<string, Buffer>;
  current: string;
} {
  const keys: Record<string, Buffer> = {};
  if (config.CREDENTIAL_KEYS) {
    for (const entry of config.CREDENTIAL_KEYS.split(',')
      .map((e) => e.trim())
      .filter(Boolean)) {
      const at = entry.indexOf(':');
      keys[entry.slice(0, at).trim()] = decodeKey(entry.slice(at + 1))!;
    }
  } else if (config.CREDENTIAL_KEY) {
    keys[SINGLE_KEY_ID] = decodeKey(config.CREDENTIAL_KEY)!;
  } else {
    // The app schema requires one of them; reaching here is a wiring bug, not bad input.
    throw new TypeError('credentialKeysFromConfig: neither CREDENTIAL_KEYS nor CREDENTIAL_KEY');
  }
  return { keys, current: config.CREDENTIAL_KEY_CURRENT ?? Object.keys(keys)[0]! };
}
