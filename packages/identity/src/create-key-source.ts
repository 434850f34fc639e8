import { nowMs } from '@mtg/clock';
import {
  createLocalJWKSet,
  errors,
  type CompactJWSHeaderParameters,
  type CryptoKey,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type LocalJWKSet,
} from 'jose';

/**
 * The issuer's keys are not available: none has ever loaded, or a key the token names is
 * unknown and the issuer could not be reached to look for it. An outage, not a bad token.
 */
export class KeysUnavailableError extends Error {
  readonly code = 'keys_unavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KeysUnavailableError';
  }
}

/** A verification key resolver for jose's `jwtVerify` (a `JWTVerifyGetKey`). */
export type GetKey = (
  protectedHeader: CompactJWSHeaderParameters,
  token: FlattenedJWSInput,
) => Promise<CryptoKey>;

export type KeySource = {
  /**
   * Loads the key set now and keeps refreshing it in the background. Idempotent. Resolves
   * once the first load has been tried (never rejects: failures go to onError, see ready()).
   */
  start(): Promise<void>;
  /** Stops background refresh. Keys already loaded keep working. */
  stop(): void;
  /** A key set has been loaded (for /readyz). */
  ready(): boolean;
  getKey: GetKey;
  /** Fetches the key set now (joining a fetch in flight); rejects when the fetch fails. */
  refresh(): Promise<void>;
};

export type RemoteKeySourceOptions = {
  jwksUri: string | URL;
  fetch?: typeof globalThis.fetch;
  /** Epoch milliseconds. */
  now?: () => number;
  /** Background refresh period once a key set is loaded; default 5 minutes. */
  refreshIntervalMs?: number;
  /**
   * Least time between two fetches caused by traffic (an unknown `kid`, no keys yet); also
   * the retry period while no key set has loaded. Default 30 s.
   */
  minRefreshGapMs?: number;
  /** Per fetch; default 5 s. */
  timeoutMs?: number;
  /** Failed background or on-demand fetches; default: a process warning. */
  onError?: (error: Error) => void;
};

/** Pinned keys: for tests and deployments that configure the key set instead of a URL. */
export type StaticKeySourceOptions = { jwks: JSONWebKeySet };

export type KeySourceOptions = RemoteKeySourceOptions | StaticKeySourceOptions;

// A JWKS is a few keys; anything this large is not one.
const MAX_JWKS_BYTES = 512 * 1024;

/**
 * The issuer's signing keys, kept in memory. Unlike jose's createRemoteJWKSet, which refetches
 * on the verification path and fails verification when the issuer is down, this keeps the last
 * good key set and refreshes it off the request path: an issuer outage only affects tokens
 * signed with keys we have never seen.
 */
export function createKeySource(options: KeySourceOptions): KeySource {
  if ('jwks' in options) return staticKeySource(options.jwks);
  return remoteKeySource(options);
}

function staticKeySource(jwks: JSONWebKeySet): KeySource {
  const keys = createLocalJWKSet(jwks);
  return {
    start: async () => {},
    stop() {},
    ready: () => true,
    getKey: (header, token) => keys(header, token),
    refresh: async () => {},
  };
}

function remoteKeySource(options: RemoteKeySourceOptions): KeySource {
  const url = new URL(options.jwksUri);
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const now = options.now ?? nowMs;
  const refreshIntervalMs = options.refreshIntervalMs ?? 5 * 60_000;
  const minRefreshGapMs = options.minRefreshGapMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 5_000;
  const onError =
    options.onError ??
    ((error: Error) => process.emitWarning(error.message, { code: 'MTG_JWKS_REFRESH' }));

  let current: LocalJWKSet | undefined;
  let inFlight: Promise<void> | undefined;
  let lastAttemptAt = -Infinity;
  let lastAttemptFailed = false;
  let timer: NodeJS.Timeout | undefined;
  // Bumped by start/stop so a refresh that finishes after stop() does not reschedule.
  let generation = 0;
  let running = false;
  let firstTick: Promise<void> | undefined;

  function report(error: unknown) {
    try {
      onError(error as Error);
    } catch {
      // A failing logger must not stop key refresh.
    }
  }

  async function load(): Promise<void> {
    lastAttemptAt = now();
    try {
      const response = await fetchImpl(url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const text = await response.text();
      if (text.length > MAX_JWKS_BYTES) throw new Error('response too large');
      current = createLocalJWKSet(JSON.parse(text) as JSONWebKeySet);
      lastAttemptFailed = false;
    } catch (cause) {
      lastAttemptFailed = true;
      const reason = cause instanceof Error ? cause.message : String(cause);
      throw new KeysUnavailableError(`fetching the JWKS at ${url.href} failed: ${reason}`, {
        cause,
      });
    }
  }

  function refresh(): Promise<void> {
    inFlight ??= load().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  /** A fetch caused by traffic: joins one in flight, else at most one per minRefreshGapMs. */
  async function refreshOnDemand(): Promise<void> {
    if (!inFlight && now() - lastAttemptAt < minRefreshGapMs) return;
    try {
      await refresh();
    } catch (error) {
      report(error);
    }
  }

  async function getKey(header: CompactJWSHeaderParameters, token: FlattenedJWSInput) {
    if (!current) await refreshOnDemand();
    const keys = current;
    if (!keys) throw new KeysUnavailableError('no signing keys have been loaded from the issuer');
    try {
      return await keys(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
      // The issuer may have rotated: look again, unless we looked very recently.
      await refreshOnDemand();
      if (current !== keys) return current!(header, token);
      if (lastAttemptFailed) {
        throw new KeysUnavailableError('the signing key is unknown and the issuer is unreachable');
      }
      throw error;
    }
  }

  function schedule(mine: number) {
    if (!running || mine !== generation) return;
    // Until the first key set loads, retry at the short gap so readiness is not 5 minutes away.
    timer = setTimeout(() => void tick(mine), current ? refreshIntervalMs : minRefreshGapMs);
    timer.unref();
  }

  async function tick(mine: number) {
    timer = undefined;
    try {
      await refresh();
    } catch (error) {
      report(error);
    }
    schedule(mine);
  }

  return {
    start() {
      if (running) return firstTick ?? Promise.resolve();
      running = true;
      firstTick = tick(++generation);
      return firstTick;
    },
    stop() {
      running = false;
      generation++;
      clearTimeout(timer);
      timer = undefined;
    },
    ready: () => current !== undefined,
    getKey,
    refresh,
  };
}
