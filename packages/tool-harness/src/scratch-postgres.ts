import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '@mtg/dev-postgres';

/** A PostgreSQL superuser URL for the harness, and what to do when the harness is done with it. */
export interface ScratchServer {
  url: string;
  release(): Promise<void>;
}

// Test data is disposable: skip the disk flushes that durability needs.
const SETTINGS = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' };

let shared: { postgres: Promise<EmbeddedPostgres>; dir: string; users: number } | undefined;

/**
 * The harness's server: the given URL, else one embedded PostgreSQL per process in a
 * temporary directory, started by the first harness and stopped (and deleted) when the last
 * one closes, so a pack's tests need no database set up by hand.
 */
export async function scratchServer(url: string | undefined): Promise<ScratchServer> {
  if (url) return { url, release: async () => {} };
  if (!shared) {
    const dir = await mkdtemp(path.join(tmpdir(), 'mtg-harness-pg-'));
    shared = {
      dir,
      users: 0,
      postgres: startEmbeddedPostgres({ dataDir: dir, settings: SETTINGS }),
    };
    // Nothing else holds a reference: a failed start must not stay cached for the next caller.
    shared.postgres.catch(() => {
      shared = undefined;
    });
  }
  const current = shared;
  current.users++;
  let postgres: EmbeddedPostgres;
  try {
    postgres = await current.postgres;
  } catch (error) {
    current.users--;
    await rm(current.dir, { recursive: true, force: true });
    throw error;
  }
  let released = false;
  return {
    url: postgres.url,
    async release() {
      if (released) return;
      released = true;
      if (--current.users > 0) return;
      if (shared === current) shared = undefined;
      await postgres.stop();
      await rm(current.dir, { recursive: true, force: true });
    },
  };
}
