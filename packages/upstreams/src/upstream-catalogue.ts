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
  /** Gateway-owned tool names: a stored row of that name is never served. */
  reserved: ReadonlySet<string> = new Set(),
): Promise<UpstreamTools> {
  const byName = new Map(upstreams.map((u) => [u.name, u]));
  const out: UpstreamTools = { long: new Map(), instant: new Map(), entries: [] };
  for (const entry of await readCatalogue(pool)) {
    const upstream = byName.get(entry.upstream);
    if (!upstream) continue; // an upstream no longer configured
    // Rows stored under an older configuration or by an older gateway (a former prefix, a
    // name now reserved) are not served: stale rows must never shadow a gateway tool or stop
    // a process from starting. The upstream's next listing replaces them.
    if (!entry.name.startsWith(upstream.prefix) || reserved.has(entry.name)) {
      logger.debug("stored upstream tool not served: its name is not the upstream's any more", {
        upstream: entry.upstream,
        tool: entry.name,
      });
      continue;
    }
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
