import { nowMs } from '@mtg/clock';
import { createHash } from 'node:crypto';
import { connectUpstream, type UpstreamConnection } from './connect-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { UpstreamError } from './upstream-error.ts';

/** A token for an upstream's audience, exchanged from the caller's, and when it expires. */
export interface ExchangedToken {
  token: string;
  /** Epoch milliseconds. */
  expiresAt: number;
}

export interface SessionCaller {
  tenant: string;
  subject: string;
  client: string;
}

/**
 * A session is not handed out within this much of its token's expiry: the exchange cache
 * stops handing out the token at the same point, so the next call brings a fresh token and
 * opens a new session with it.
 */
export const SESSION_EXPIRY_MARGIN_MS = 30_000;

/** How long shutdown waits for the upstreams to acknowledge their sessions' end. */
const CLOSE_BOUND_MS = 3_000;

/** One call's use of a session. */
export interface SessionLease {
  readonly connection: UpstreamConnection;
  /** Done with the session; it stays open for the next call unless it was evicted. */
  release(): void;
  /**
   * The session is unusable (dropped by the upstream, its token refused, the upstream
   * failing): no call gets it again; it is closed once no call uses it. `dropped`: the
   * upstream no longer knows it, so it is not asked to end it.
   */
  evict(options?: { dropped?: boolean }): void;
}

interface Pooled {
  key: string;
  connection: Promise<UpstreamConnection>;
  expiresAt: number;
  lastUsed: number;
  inFlight: number;
  evicted: boolean;
  dropped: boolean;
}

export interface UpstreamSessionPool {
  acquire(caller: SessionCaller, exchanged: ExchangedToken): Promise<SessionLease>;
  /** Closes every kept session (the upstream is failing); calls in flight finish first. */
  evictAll(): void;
  /** Sessions open now (for tests and metrics). */
  size(): number;
  /** Ends every session (DELETE to the upstream), at shutdown. */
  close(): Promise<void>;
}

/**
 * Open MCP sessions with one upstream, kept for instant calls so a call is one request
 * instead of four (initialize, initialized, the call, DELETE). A session belongs to one
 * caller (tenant, subject, client) and one exchanged token, and is only ever used with that
 * token: a session never carries another caller's identity, nor a token it was not opened
 * with. Calls of one caller share its session concurrently (MCP allows requests in flight
 * side by side in one session); each call still goes through the upstream's guard.
 *
 * A session goes when its token nears expiry, after `sessionIdleMs` unused, least recently
 * used first when `maxSessions` are open, and when a call evicts it. With `maxSessions` 0
 * every call opens its own session and ends it.
 */
export function createUpstreamSessionPool(options: {
  upstream: UpstreamConfig;
  timeoutMs: number;
  fetch?: typeof fetch;
  now?: () => number;
}): UpstreamSessionPool {
  const { upstream } = options;
  const now = options.now ?? nowMs;
  // Insertion order is use order: a session handed out is moved to the end.
  const sessions = new Map<string, Pooled>();
  let closed = false;

  const open = (exchanged: ExchangedToken) =>
    connectUpstream({
      upstream: upstream.name,
      url: upstream.url,
      token: async () => exchanged.token,
      // The session is bound to its token: a 401 ends it, and the call decides whether to
      // exchange again and open another (instant tool: one re-exchange).
      reauthenticate: async () => {
        throw new UpstreamError(
          'upstream_unauthorized',
          upstream.name,
          `upstream ${upstream.name} refused the exchanged token (401)`,
          { status: 401 },
        );
      },
      maxResponseBytes: upstream.maxResponseBytes,
      timeoutMs: options.timeoutMs,
      listen: false,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });

  const end = (p: Pooled) => {
    // A session that never opened has nothing to end.
    void p.connection.then((c) => c.close({ terminate: !p.dropped })).catch(() => {});
  };
  const evict = (p: Pooled) => {
    p.evicted = true;
    if (sessions.get(p.key) === p) sessions.delete(p.key);
    if (p.inFlight === 0) end(p);
  };
  const usable = (p: Pooled, t: number) => !p.evicted && p.expiresAt - SESSION_EXPIRY_MARGIN_MS > t;
  let swept = 0;
  const sweep = () => {
    const t = now();
    swept = t;
    for (const p of [...sessions.values()]) {
      if (!usable(p, t) || (p.inFlight === 0 && t - p.lastUsed >= upstream.sessionIdleMs)) {
        evict(p);
      }
    }
  };
  const timer = setInterval(sweep, Math.min(Math.max(upstream.sessionIdleMs / 2, 1000), 30_000));
  timer.unref();

  const leaseOf = (p: Pooled, connection: UpstreamConnection): SessionLease => {
    let released = false;
    return {
      connection,
      release() {
        if (released) return;
        released = true;
        p.inFlight--;
        p.lastUsed = now();
        if (p.evicted && p.inFlight === 0) end(p);
      },
      evict(o = {}) {
        if (o.dropped) p.dropped = true;
        p.evicted = true;
        if (sessions.get(p.key) === p) sessions.delete(p.key);
      },
    };
  };

  return {
    size: () => sessions.size,
    evictAll() {
      for (const p of [...sessions.values()]) evict(p);
    },
    async acquire(caller, exchanged) {
      if (closed) {
        throw new UpstreamError(
          'upstream_unreachable',
          upstream.name,
          'the gateway is shutting down',
        );
      }
      if (upstream.maxSessions === 0) {
        // No reuse: this call's own session, ended when the call is done.
        const connection = await open(exchanged);
        return {
          connection,
          release: () => void connection.close({ terminate: true }),
          evict: () => {},
        };
      }
      // At most once a second on the call path (the timer does it too); the session this
      // call gets is checked on its own below.
      if (now() - swept >= 1000) sweep();
      const key = createHash('sha256')
        .update(JSON.stringify([caller.tenant, caller.subject, caller.client, exchanged.token]))
        .digest('base64url');
      let p = sessions.get(key);
      if (p && usable(p, now())) {
        sessions.delete(key);
        sessions.set(key, p);
      } else {
        if (p) evict(p);
        while (sessions.size >= upstream.maxSessions) {
          // The least recently used idle session goes first; when every one is busy, the
          // least recently used anyway (closed once its calls are done).
          const victim =
            [...sessions.values()].find((s) => s.inFlight === 0) ?? sessions.values().next().value!;
          evict(victim);
        }
        p = {
          key,
          connection: open(exchanged),
          expiresAt: exchanged.expiresAt,
          lastUsed: now(),
          inFlight: 0,
          evicted: false,
          dropped: false,
        };
        sessions.set(key, p);
      }
      const mine = p;
      mine.inFlight++;
      try {
        return leaseOf(mine, await mine.connection);
      } catch (error) {
        // It never opened: nobody may wait on it again.
        mine.inFlight--;
        mine.evicted = true;
        if (sessions.get(key) === mine) sessions.delete(key);
        throw error;
      }
    },
    async close() {
      closed = true;
      clearInterval(timer);
      const all = [...sessions.values()];
      sessions.clear();
      // Bounded: an upstream that does not answer its DELETE does not hold up the shutdown.
      let bound: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(
          all.map((p) =>
            p.connection.then((c) => c.close({ terminate: !p.dropped })).catch(() => {}),
          ),
        ),
        new Promise((r) => {
          bound = setTimeout(r, CLOSE_BOUND_MS);
        }),
      ]);
      clearTimeout(bound);
    },
  };
}
