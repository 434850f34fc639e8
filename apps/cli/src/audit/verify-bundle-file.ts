import { readFile } from 'node:fs/promises';
import type { JSONWebKeySet } from 'jose';
import { verifyBundle, type BundleReport } from '@mtg/audit';
import { CliError } from './database.ts';

/** Reads and verifies an evidence bundle file: no database involved. */
export async function verifyBundleFile(file: string, keys: JSONWebKeySet): Promise<BundleReport> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read the bundle ${file}: ${(error as NodeJS.ErrnoException).code}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return {
      ok: false,
      failure: { code: 'malformed', seq: 0, message: `${file} is not JSON` },
      selected: 0,
      recomputed: 0,
      redacted: 0,
      chains: [],
    };
  }
  return verifyBundle(json, keys);
}

export function describeBundle(file: string, r: BundleReport): string[] {
  const range =
    r.chains.length === 0
      ? 'no events'
      : r.chains
          .map(
            (c) =>
              `events ${c.firstSeq}..${c.lastSeq} of chain ${c.chain}${c.chain === 0 ? ' (system)' : c.tenant !== null ? ` (tenant ${c.tenant})` : ''}`,
          )
          .join(', ');
  const period = r.period ? `, period ${r.period.from} .. ${r.period.to}` : '';
  const counts = `${r.selected} selected, ${r.recomputed} recomputed, ${r.redacted} of other tenants redacted (links checked, content not)`;
  if (r.ok) {
    const cp = r.checkpoint
      ? `, up to the checkpoint signed ${r.checkpoint.signedAt} by key ${r.checkpoint.keyId}`
      : '';
    return [`bundle ${file} verified: ${range}${period}${cp}; ${counts}`];
  }
  const f = r.failure!;
  return [
    `bundle ${file} BROKEN${f.seq ? ` at event ${f.seq}` : ''} (${f.code})${f.chain !== undefined ? ` in chain ${f.chain}` : ''}: ${f.message}`,
    `checked ${range}${period}; ${counts}`,
  ];
}
