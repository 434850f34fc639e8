import { appendFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ChainHead, CheckpointInput, SignedCheckpoint } from '@mtg/audit';
import { CliError } from './database.ts';

/**
 * Reads checkpoints kept outside the database: JSON Lines as `audit:checkpoint --out`
 * writes them (one object with a `jws` per line), bare compact JWS lines, or one JSON array
 * of either.
 */
export async function readCheckpointFile(file: string): Promise<CheckpointInput[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(
      `cannot read the checkpoints ${file}: ${(error as NodeJS.ErrnoException).code}`,
    );
  }
  const name = path.basename(file);
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    let items: unknown[];
    try {
      items = JSON.parse(trimmed) as unknown[];
    } catch {
      throw new CliError(`${file} is not a JSON array of checkpoints`);
    }
    return items.map((item, i) => ({
      source: `${name}[${i}]`,
      jws: jwsOf(item, `${file}[${i}]`),
      ...headsOf(item),
    }));
  }
  const out: CheckpointInput[] = [];
  text.split('\n').forEach((line, i) => {
    const l = line.trim();
    if (!l) return;
    let item: unknown = l;
    if (l.startsWith('{')) {
      try {
        item = JSON.parse(l);
      } catch {
        throw new CliError(`${file}:${i + 1} is not JSON`);
      }
    }
    out.push({
      source: `${name}:${i + 1}`,
      jws: jwsOf(item, `${file}:${i + 1}`),
      ...headsOf(item),
    });
  });
  return out;
}

function jwsOf(item: unknown, where: string): string {
  const jws = typeof item === 'string' ? item : (item as { jws?: unknown } | null)?.jws;
  if (typeof jws !== 'string' || jws.split('.').length !== 3) {
    throw new CliError(
      `${where} holds no checkpoint (expected a compact JWS, or an object with "jws")`,
    );
  }
  return jws;
}

/**
 * The heads a line carries next to its JWS (a format 2 checkpoint signs only their hash; the
 * verifier checks them against it). A line without them takes them from the stored row.
 */
function headsOf(item: unknown): { heads?: ChainHead[] } {
  const heads = (item as { heads?: unknown } | null)?.heads;
  return Array.isArray(heads) ? { heads: heads as ChainHead[] } : {};
}

/** One checkpoint as one JSON line: what stdout and `--out` get. */
export function checkpointLine(c: SignedCheckpoint & { id?: number }): string {
  return JSON.stringify({
    signedAt: c.signedAt,
    keyId: c.keyId,
    ...(c.id !== undefined ? { id: c.id } : {}),
    chains: c.heads.length,
    legacyUntil: c.legacyUntil,
    headsHash: c.headsHash,
    heads: c.heads,
    jws: c.jws,
  });
}

export async function appendCheckpointLine(file: string, line: string): Promise<void> {
  await mkdir(path.dirname(path.resolve(file)), { recursive: true });
  await appendFile(file, line + '\n');
}
