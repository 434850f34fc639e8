import { EMBEDDED_HANDLE, removeClusterDir, type EmbeddedTestCluster } from './global-setup.ts';

/** jest globalTeardown: stops the embedded cluster that global-setup.ts started, if any. */
export default async function globalTeardown(): Promise<void> {
  const store = globalThis as Record<symbol, unknown>;
  const cluster = store[EMBEDDED_HANDLE] as EmbeddedTestCluster | undefined;
  delete store[EMBEDDED_HANDLE];
  if (!cluster) return;
  await cluster.postgres.stop();
  if (cluster.removeDir) await removeClusterDir(cluster.removeDir);
}
