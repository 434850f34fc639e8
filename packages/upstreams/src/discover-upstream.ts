import type { Logger } from '@mtg/log';
import type { CatalogueEntry } from './catalogue-store.ts';
import type { UpstreamConnection } from './connect-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { UpstreamError } from './upstream-error.ts';
import { admitted, catalogueFingerprint, servedName } from './upstream-tool-name.ts';

const MAX_PAGES = 50;

/** Lists an upstream's tools (every page) and turns them into catalogue entries. */
export async function discoverUpstream(
  connection: UpstreamConnection,
  upstream: UpstreamConfig,
  logger: Logger,
): Promise<CatalogueEntry[]> {
  const entries: CatalogueEntry[] = [];
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
        logger.warn('upstream tool skipped: its prefixed name is not a valid MCP tool name', {
          upstream: upstream.name,
          tool: upstreamName,
        });
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
  return entries;
}
