import { createPool, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { LongTool } from '@mtg/tool-kit';
import type { Catalogue, ToolDefinition } from '@mtg/tools';
import { createCatalogue } from '@mtg/tools';
import { recordDiscoveryFailure, replaceCatalogue } from './catalogue-store.ts';
import { connectUpstream } from './connect-upstream.ts';
import { discoverUpstream } from './discover-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { isUpstreamError, UpstreamError } from './upstream-error.ts';
import { createUpstreamGuard, type UpstreamGuard } from './upstream-guard.ts';
import { upstreamToolsFrom, type UpstreamTools } from './upstream-catalogue.ts';

export interface UpstreamHubOptions {
  upstreams: readonly UpstreamConfig[];
  databaseUrl: string;
  databaseRole: string;
  logger: Logger;
  /** The gateway's own token for an upstream's audience, for listing its tools. */
  serviceToken(audience: string): Promise<string>;
  /** The caller's token exchanged for an upstream's audience (instant calls). */
  exchange(callerToken: string, audience: string, scope: string): Promise<string>;
  /** Long tools that are not the upstreams' (the packs'). */
  ownLong: ReadonlyMap<string, LongTool>;
  fetch?: typeof fetch;
}

/**
 * The gateway's side of the upstreams: lists each upstream's tools at start and every
 * `refreshMs` (and on notifications/tools/list_changed during a listing), stores them in
 * PostgreSQL, and serves what the stored catalogue says — so an upstream that is down is
 * served from its last good listing, and every replica serves the same list.
 */
export async function startUpstreamHub(options: UpstreamHubOptions) {
  const pool: Pool = createPool({
    connectionString: options.databaseUrl,
    role: options.databaseRole,
    applicationName: 'gateway-upstreams',
    max: 4,
  });
  const guards = new Map<string, UpstreamGuard>(
    options.upstreams.map((u) => [
      u.name,
      createUpstreamGuard({
        upstream: u.name,
        maxConcurrency: u.maxConcurrency,
        breakerThreshold: u.breakerThreshold,
        breakerCooldownMs: u.breakerCooldownMs,
      }),
    ]),
  );
  const longTools = new Map<string, LongTool>(options.ownLong);
  let current: UpstreamTools = { long: new Map(), instant: new Map(), entries: [] };
  let ownInstant: ToolDefinition[] = [];
  let catalogue = createCatalogue([]);

  const rebuild = async () => {
    current = await upstreamToolsFrom(pool, options.upstreams, options.logger, (u) => ({
      pool,
      logger: options.logger,
      guard: guards.get(u.name)!,
      exchange: options.exchange,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    }));
    catalogue = createCatalogue([...ownInstant, ...current.instant.values()]);
    for (const name of [...longTools.keys()]) {
      if (!options.ownLong.has(name)) longTools.delete(name);
    }
    for (const [name, e] of current.long) {
      if (!options.ownLong.has(name)) longTools.set(name, e.tool);
    }
  };

  const discover = async (upstream: UpstreamConfig): Promise<boolean> => {
    let relist = false;
    try {
      const connection = await guards.get(upstream.name)!.run(undefined, () =>
        connectUpstream({
          upstream: upstream.name,
          url: upstream.url,
          token: () => options.serviceToken(upstream.audience),
          reauthenticate: () => options.serviceToken(upstream.audience),
          maxResponseBytes: upstream.maxResponseBytes,
          timeoutMs: upstream.timeoutMs,
          onNotification: (n) => {
            if (n.method === 'notifications/tools/list_changed') relist = true;
          },
          ...(options.fetch ? { fetch: options.fetch } : {}),
        }),
      );
      try {
        const entries = await discoverUpstream(connection, upstream, options.logger);
        const changed = await replaceCatalogue(pool, upstream.name, entries);
        options.logger.info('upstream tools listed', {
          upstream: upstream.name,
          tools: entries.length,
          changed,
        });
        return changed || relist;
      } finally {
        await connection.close({ terminate: true });
      }
    } catch (error) {
      const message =
        isUpstreamError(error) || error instanceof Error ? error.message : String(error);
      options.logger.warn('upstream listing failed; its last good listing is served', {
        upstream: upstream.name,
        code: isUpstreamError(error) ? error.code : undefined,
        error: message,
      });
      await recordDiscoveryFailure(pool, upstream.name, message).catch(() => {});
      return false;
    }
  };

  const refreshAll = async () => {
    const results = await Promise.all(options.upstreams.map((u) => discover(u)));
    await rebuild();
    return results.some(Boolean);
  };
  await refreshAll();
  const timers = options.upstreams.map((u) =>
    setInterval(() => {
      discover(u)
        .then(() => rebuild())
        .catch((error: Error) =>
          options.logger.warn('upstream refresh failed', {
            upstream: u.name,
            error: error.message,
          }),
        );
    }, u.refreshMs),
  );
  for (const t of timers) t.unref();

  return {
    /** Every tool name the upstreams contribute now. */
    names: () => current.entries.map((e) => e.name),
    /** Pack and upstream long tools, kept current by each refresh. */
    longTools: longTools as ReadonlyMap<string, LongTool>,
    /** The gateway's instant tools and the upstreams', kept current by each refresh. */
    serve(own: ToolDefinition[]): Catalogue {
      ownInstant = own;
      catalogue = createCatalogue([...ownInstant, ...current.instant.values()]);
      return {
        visibleTo: (p) => catalogue.visibleTo(p),
        get: (n) => catalogue.get(n),
        call: (...a) => catalogue.call(...a),
      };
    },
    /** Scopes the upstreams' tools require. */
    scopes: () =>
      [
        ...new Set(
          options.upstreams.flatMap((u) => [
            u.scope,
            ...Object.values(u.tools).flatMap((t) => (t.scope ? [t.scope] : [])),
          ]),
        ),
      ].sort(),
    placement(name: string) {
      const e = current.long.get(name);
      return e ? { queue: e.queue, version: e.version, fingerprint: e.fingerprint } : undefined;
    },
    /** Lists every upstream again now (tests, operators). */
    refresh: refreshAll,
    async close() {
      for (const t of timers) clearInterval(t);
      await pool.end();
    },
  };
}

export type UpstreamHub = Awaited<ReturnType<typeof startUpstreamHub>>;
export { UpstreamError };
