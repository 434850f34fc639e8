import type { EmbeddedPostgres } from '../../packages/db/src/index.ts';
import { EMBEDDED_HANDLE } from './global-setup.ts';

/** jest globalTeardown: stops the embedded cluster that global-setup.ts started, if any. */
export default async function globalTeardown(): Promise<void> {
  const store = globalThis as Record<symbol, unknown>;
  const postgres = store[EMBEDDED_HANDLE] as EmbeddedPostgres | undefined;
  delete store[EMBEDDED_HANDLE];
  await postgres?.stop();
}
