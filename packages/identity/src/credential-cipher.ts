import {
  createCipheriv,
  createDecipheriv,
  createSecretKey,
  randomBytes,
  type KeyObject,
} from 'node:crypto';

export interface SealedCredential {
  keyId: string;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

/**
 * AES-256-GCM for credentials at rest. `keys` maps key ids to 32-byte keys; `currentKeyId`
 * encrypts, any listed key decrypts (rotation: add the new key, make it current, keep the
 * old one until every credential sealed under it has expired). The task id is bound as
 * additional data, so a ciphertext moved to another task's row does not decrypt.
 */
export function createCredentialCipher(keys: Record<string, Buffer>, currentKeyId: string) {
  for (const [id, key] of Object.entries(keys)) {
    if (key.length !== 32) throw new TypeError(`credential key ${id} must be 32 bytes`);
  }
  if (!keys[currentKeyId])
    throw new TypeError(`current credential key ${currentKeyId} is not in the key set`);
  // Key objects made once: a raw Buffer key is turned into one on every cipher (about 11 µs).
  const keyObjects = new Map<string, KeyObject>(
    Object.entries(keys).map(([id, key]) => [id, createSecretKey(key)]),
  );
  const current = keyObjects.get(currentKeyId)!;
  return {
    currentKeyId,
    seal(plaintext: string, boundTo: string): SealedCredential {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', current, iv);
      cipher.setAAD(Buffer.from(boundTo));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return { keyId: currentKeyId, iv, ciphertext, tag: cipher.getAuthTag() };
    },
    open(sealed: SealedCredential, boundTo: string): string {
      const key = keyObjects.get(sealed.keyId);
      if (!key) throw new Error(`credential sealed under unknown key ${sealed.keyId}`);
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.iv);
      decipher.setAAD(Buffer.from(boundTo));
      decipher.setAuthTag(sealed.tag);
      return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
    },
  };
}

export type CredentialCipher = ReturnType<typeof createCredentialCipher>;
