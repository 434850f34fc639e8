import { createPool, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { LongTool } from '@mtg/tool-kit';
import type { Catalogue, ToolDefinition } from '@mtg/tools';
import { createCatalogue } from '@mtg/tools';
import { recordDiscoveryFailure, replaceCatalogue } from './catalogue-store.ts';
import { connectUpstream, type UpstreamConnection } from './connect-upstream.ts';
import { discoverUpstream } from './discover-upstream.ts';
import type { RefusedTool } from './refused-tool.ts';
import { upstreamQueue, type UpstreamConfig } from './upstream-config.ts';
import { isUpstreamError, UpstreamError } from './upstream-error.ts';
import { createUpstreamGuard, type UpstreamGuard } from './upstream-guard.ts';
import { createUpstreamCallLimit } from './upstream-call-limit.ts';
import { upstreamToolsFrom, type UpstreamTools } from './upstream-catalogue.ts';
import {
  createUpstreamSessionPool,
  type ExchangedToken,
  type UpstreamSessionPool,
} from './upstream-session-pool.ts';

export interface UpstreamHubOptions {
  upstreams: readonly UpstreamConfig[];
  databaseUrl: string;
  databaseRole: string;
  logger: Logger;
  /** The gateway's own token for an upstream's audience, for listing its tools. */
  serviceToken(audience: string): Promise<string>;
  /** The caller's token exchanged for an upstream's audience (instant calls). */
  exchange(
    callerToken: string,
    audience: string,
    scope: string,
    options?: { fresh?: boolean },
  ): Promise<ExchangedToken>;
  /** The gateway's clock (tests move it); default: the system's. */
  now?: () => number;
  /** Proxied instant calls per caller per minute (0: off). */
  callsPerMinute: number;
  /** Long tools that are not the upstreams' (the packs'). */
  ownLong: ReadonlyMap<string, LongTool>;
  /**
   * Every gateway-owned tool name (job tools, whoami, every pack tool): an upstream tool of
   * one of these names is refused, never served in its place.
   */
  reserved: readonly string[];
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
  // Instant calls' upstream sessions, kept per caller and exchanged token (one pool each).
  const sessions = new Map<string, UpstreamSessionPool>(
    options.upstreams.map((u) => [
      u.name,
      createUpstreamSessionPool({
        upstream: u,
        timeoutMs: u.timeoutMs,
        ...(options.fetch ? { fetch: options.fetch } : {}),
        ...(options.now ? { now: options.now } : {}),
      }),
    ]),
  );
  const longTools = new Map<string, LongTool>(options.ownLong);
  // The hub's clock is the gateway's, read in epoch ms.
  const now = options.now;
  const limit = createUpstreamCallLimit(
    pool,
    options.callsPerMinute,
    now ? () => new Date(now()) : undefined,
  );
  let current: UpstreamTools = { long: new Map(), instant: new Map(), entries: [] };
  let ownInstant: ToolDefinition[] = [];
  let catalogue = createCatalogue([]);
  const reserved = new Set([...options.reserved, ...options.ownLong.keys()]);
  // Tools refused by listings of this process, by upstream and reason (a Prometheus counter).
  const refusedCounts = new Map<string, { upstream: string; reason: string; count: number }>();
  const countRefused = (refused: readonly RefusedTool[]) => {
    for (const r of refused) {
      const key = `${r.upstream}\n${r.reason}`;
      const c = refusedCounts.get(key) ?? { upstream: r.upstream, reason: r.reason, count: 0 };
      c.count += 1;
      refusedCounts.set(key, c);
    }
  };
  // Never a name twice: a gateway tool given to serve() later than `reserved` still wins.
  const catalogueOf = () => {
    const own = new Set(ownInstant.map((t) => t.name));
    return createCatalogue([
      ...ownInstant,
      ...[...current.instant.values()].filter((t) => !own.has(t.name)),
    ]);
  };
  // Whether a stored row of another upstream is left over from an older configuration.
  const configured = new Map(options.upstreams.map((u) => [u.name, u]));
  const stale = (row: { upstream: string; name: string }) => {
    const owner = configured.get(row.upstream);
    return !owner || !row.name.startsWith(owner.prefix);
  };

  const rebuild = async () => {
    current = await upstreamToolsFrom(
      pool,
      options.upstreams,
      options.logger,
      (u) => ({
        pool,
        limit,
        logger: options.logger,
        guard: guards.get(u.name)!,
        exchange: options.exchange.bind(options),
        sessions: sessions.get(u.name)!,
      }),
      reserved,
    );
    catalogue = catalogueOf();
    for (const name of [...longTools.keys()]) {
      if (!options.ownLong.has(name)) longTools.delete(name);
    }
    for (const [name, e] of current.long) {
      if (!options.ownLong.has(name)) longTools.set(name, e.tool);
    }
  };

  // The session of each upstream's last listing stays open: its notifications/tools/list_changed
  // starts a new listing at once (each listing replaces the watched session).
  const watched = new Map<string, UpstreamConnection>();
  const watchFailures = new Map<string, { count: number; since: number }>();
  // The watched session broke (the upstream restarted, or dropped it): list again soon, with
  // backoff up to refreshMs, so notifications keep arriving.
  const watchFailed = (upstream: UpstreamConfig) => {
    const f = watchFailures.get(upstream.name) ?? { count: 0, since: performance.now() };
    if (performance.now() - f.since > 30_000) f.count = 0;
    const delay = Math.min(1000 * 2 ** f.count, upstream.refreshMs);
    watchFailures.set(upstream.name, { count: f.count + 1, since: performance.now() });
    watched.delete(upstream.name);
    setTimeout(() => relist(upstream), delay).unref();
  };
  const relisting = new Set<string>();
  // A change announced while a listing of that upstream runs may have come after the listing
  // read its tools: one more listing follows, rather than the change waiting for refreshMs.
  const relistAgain = new Set<string>();
  let closed = false;
  const relist = (upstream: UpstreamConfig) => {
    if (closed) return;
    if (relisting.has(upstream.name)) {
      relistAgain.add(upstream.name);
      return;
    }
    relisting.add(upstream.name);
    setTimeout(() => {
      discover(upstream)
        .then(() => rebuild())
        .catch((error: Error) =>
          options.logger.warn('upstream relisting failed', {
            upstream: upstream.name,
            error: error.message,
          }),
        )
        .finally(() => {
          relisting.delete(upstream.name);
          if (relistAgain.delete(upstream.name)) relist(upstream);
        });
    }, 50).unref();
  };

  const discover = async (upstream: UpstreamConfig): Promise<boolean> => {
    let mine: UpstreamConnection | undefined;
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
            if (n.method === 'notifications/tools/list_changed') relist(upstream);
          },
          onTransportError: () => {
            if (mine && watched.get(upstream.name) === mine && !closed) watchFailed(upstream);
          },
          ...(options.fetch ? { fetch: options.fetch } : {}),
        }),
      );
      let listing;
      try {
        listing = await discoverUpstream(connection, upstream, options.logger, reserved);
      } catch (error) {
        await connection.close({ terminate: true });
        throw error;
      }
      const previous = watched.get(upstream.name);
      mine = connection;
      watched.set(upstream.name, connection);
      await previous?.close({ terminate: true });
      if (closed) await connection.close({ terminate: true });
      const { changed, refused } = await replaceCatalogue(pool, upstream.name, listing.entries, {
        refused: listing.refused,
        stale,
      });
      countRefused(refused);
      const taken = refused.filter((r) => r.reason === 'name_taken');
      if (taken.length) {
        options.logger.warn('upstream tools refused: another upstream serves their names', {
          upstream: upstream.name,
          tools: taken.slice(0, 20).map((r) => r.upstreamName),
        });
      }
      options.logger.info('upstream tools listed', {
        upstream: upstream.name,
        tools: listing.entries.length - taken.length,
        refused: refused.length,
        changed,
      });
      return changed;
    } catch (error) {
      const message =
        isUpstreamError(error) || error instanceof Error ? error.message : String(error);
      options.logger.warn('upstream listing failed; its last good listing is served', {
        upstream: upstream.name,
        code: isUpstreamError(error) ? error.code : undefined,
        error: message,
      });
      await recordDiscoveryFailure(pool, upstream.name, message).catch(() => {});
      if (!watched.has(upstream.name)) watchFailed(upstream);
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
    /** Each upstream's protection (circuit, concurrency cap), for its metrics. */
    guards: guards as ReadonlyMap<string, UpstreamGuard>,
    /** Each upstream's kept instant-call sessions. */
    sessions: sessions as ReadonlyMap<string, UpstreamSessionPool>,
    /** One queue per upstream, for its task-mode tools. */
    queues: options.upstreams.map((u) => upstreamQueue(u.name)),
    /** Every tool name the upstreams contribute now. */
    names: () => current.entries.map((e) => e.name),
    /** Pack and upstream long tools, kept current by each refresh. */
    longTools: longTools as ReadonlyMap<string, LongTool>,
    /** The gateway's instant tools and the upstreams', kept current by each refresh. */
    /** Tools refused by this process's listings so far, by upstream and reason. */
    refusedCounts: () => [...refusedCounts.values()],
    serve(own: ToolDefinition[]): Catalogue {
      ownInstant = own;
      catalogue = catalogueOf();
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
      closed = true;
      for (const t of timers) clearInterval(t);
      for (const c of watched.values()) await c.close({ terminate: true });
      await Promise.all([...sessions.values()].map((p) => p.close()));
      await pool.end();
    },
  };
}

export type UpstreamHub = Awaited<ReturnType<typeof startUpstreamHub>>;
export { UpstreamError };
