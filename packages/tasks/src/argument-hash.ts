import { createHash } from 'node:crypto';
import { canonicalJson } from '@mtg/audit';

/** sha256 over the tool name and its canonical arguments. */
export function argumentHash(tool: string, args: unknown): string {
  return createHash('sha256').update(canonicalJson({ tool, args })).digest('hex');
}

/** The derived idempotency key: principal, tool and arguments, so equal calls collide. */
export function derivedKey(
  owner: { tenant: string; subject: string; client: string },
  hash: string,
) {
  return createHash('sha256')
    .update(canonicalJson({ ...owner, hash }))
    .digest('hex');
}
