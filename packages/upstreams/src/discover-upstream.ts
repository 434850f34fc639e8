import type { Logger } from '@mtg/log';
import type { CatalogueEntry } from './catalogue-store.ts';
import type { RefusedTool } from './refused-tool.ts';
import type { UpstreamConnection } from './connect-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { UpstreamError } from './upstream-error.ts';
import { admitted, catalogueFingerprint, servedName } from './upstream-tool-name.ts';

const MAX_PAGES = 50;

/**
 * Lists an upstream's tools (every page) and turns them into catalogue entries. A tool that
 * cannot be served (a reserved name, past `maxTools`, an invalid or repeated name) is refused
 * on its own: the listing goes on, and the refusal is answered for the hub to record.
 */
export async function discoverUpstream(
  connection: UpstreamConnection,
  upstream: UpstreamConfig,
  logger: Logger,
  /** Every gateway-owned tool name (job tools, whoami, the packs' tools). */
  reserved: ReadonlySet<string> = new Set(),
): Promise<{ entries: CatalogueEntry[]; refused: RefusedTool[] }> {
  const entries: CatalogueEntry[] = [];
  const refused: RefusedTool[] = [];
  const seen = new Set<string>();
  const refuse = (upstreamName: string, name: string | null, reason: RefusedTool['reason']) =>
    refused.push({ upstream: upstream.name, upstreamName, name, reason });
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await connection.request('tools/list', cursor ? { cursor } : {}, {
      timeoutMs: upstream.timeoutMs,
    });
    const tools = result.tools;
    if (!Array.isArray(tools)) {
      throw new UpstreamError(
        'upstream_protocol_error',
        upstream.name,
        `upstream ${upstream.name}: tools/list answered without a tools array`,
      );
    }
    for (const raw of tools as Array<Record<string, unknown>>) {
      const upstreamName = typeof raw.name === 'string' ? raw.name : undefined;
      if (!upstreamName || !admitted(upstream, upstreamName)) continue;
      const name = servedName(upstream, upstreamName);
      if (!name) {
        refuse(upstreamName, null, 'invalid_name');
        continue;
      }
      if (reserved.has(name)) {
        refuse(upstreamName, name, 'reserved_name');
        continue;
      }
      if (seen.has(name)) {
        refuse(upstreamName, name, 'duplicate_name');
        continue;
      }
      seen.add(name);
      if (entries.length >= upstream.maxTools) {
        refuse(upstreamName, name, 'over_cap');
        continue;
      }
      const inputSchema =
        raw.inputSchema && typeof raw.inputSchema === 'object'
          ? (raw.inputSchema as Record<string, unknown>)
          : { type: 'object' };
      const support = (raw.execution as { taskSupport?: unknown } | undefined)?.taskSupport;
      const taskSupport =
        support === 'optional' || support === 'required' ? support : ('forbidden' as const);
      entries.push({
        upstream: upstream.name,
        name,
        upstreamName,
        title: typeof raw.title === 'string' ? raw.title : null,
        description: typeof raw.description === 'string' ? raw.description.slice(0, 4000) : '',
        inputSchema,
        taskSupport,
        fingerprint: catalogueFingerprint({
          upstream: upstream.name,
          name,
          upstreamName,
          inputSchema,
          taskSupport,
        }),
      });
    }
    cursor = typeof result.nextCursor === 'string' ? result.nextCursor : undefined;
    if (!cursor) break;
  }
  if (refused.length) {
    logger.warn("upstream tools refused: not served, the upstream's other tools are", {
      upstream: upstream.name,
      refused: refused.length,
      served: entries.length,
      // The first few by name; the console and the table keep the rest.
      tools: refused.slice(0, 20).map((r) => `${r.upstreamName} (${r.reason})`),
    });
  }
  return { entries, refused };
}
