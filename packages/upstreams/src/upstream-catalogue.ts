import type { Pool } from 'pg';
import type { Logger } from '@mtg/log';
import type { LongTool } from '@mtg/tool-kit';
import type { ToolDefinition } from '@mtg/tools';
import { readCatalogue, type CatalogueEntry } from './catalogue-store.ts';
import { upstreamQueue, type UpstreamConfig } from './upstream-config.ts';
import { upstreamInstantTool, type InstantProxyDeps } from './upstream-instant-tool.ts';
import { resolveMode, upstreamLongTool } from './upstream-long-tool.ts';

/** What the catalogue in PostgreSQL makes of the upstreams, for one process. */
export interface UpstreamTools {
  long: Map<string, { tool: LongTool; fingerprint: string; queue: string; version: string }>;
  instant: Map<string, ToolDefinition>;
  entries: CatalogueEntry[];
}

/**
 * Builds the upstream tools from the stored catalogue: the gateway and every worker read the
 * same rows, so they agree on names, modes, schemas and fingerprints. `instant` is only built
 * where calls are proxied (the gateway).
 */
export async function upstreamToolsFrom(
  pool: Pool,
  upstreams: readonly UpstreamConfig[],
  logger: Logger,
  instant?: (upstream: UpstreamConfig) => InstantProxyDeps,
): Promise<UpstreamTools> {
  const byName = new Map(upstreams.map((u) => [u.name, u]));
  const out: UpstreamTools = { long: new Map(), instant: new Map(), entries: [] };
  for (const entry of await readCatalogue(pool)) {
    const upstream = byName.get(entry.upstream);
    if (!upstream) continue; // an upstream no longer configured
    out.entries.push(entry);
    try {
      if (resolveMode(upstream, entry) === 'task') {
        out.long.set(entry.name, {
          tool: upstreamLongTool(upstream, entry),
          fingerprint: entry.fingerprint,
          queue: upstreamQueue(upstream.name),
          version: entry.fingerprint.slice(0, 12),
        });
      } else if (instant) {
        out.instant.set(entry.name, upstreamInstantTool(upstream, entry, instant(upstream)));
      }
    } catch (error) {
      logger.warn('upstream tool not served', {
        upstream: entry.upstream,
        tool: entry.name,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
  return out;
}
