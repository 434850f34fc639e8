import { createHash } from 'node:crypto';
import * as oidc from 'openid-client';
import { httpFetch } from './http-fetch.ts';

/**
 * How long discovered metadata is used before it is looked up again: an IdP that moves its
 * endpoints is followed within this time, and one that is down meanwhile costs nothing.
 */
export const DISCOVERY_MAX_AGE_MS = 60 * 60 * 1000;
/** After a failed refresh, the metadata in hand is used this long before the next attempt. */
export const DISCOVERY_RETRY_MS = 30 * 1000;

interface Discovered {
  /** The first discovery, then the metadata in hand. */
  configuration: Promise<oidc.Configuration>;
  /** Metadata has been fetched: a refresh that fails keeps using it. */
  settled: boolean;
  /** performance.now() of the last successful discovery, and of the last attempt. */
  fetchedAt: number;
  triedAt: number;
  /** A grant failed in a way that may mean the metadata is out of date. */
  stale: boolean;
  refreshing?: Promise<void>;
}

/**
 * One discovery per issuer and client in this process: the worker's token exchanger, its
 * workload token and the gateway's exchangers and service tokens are separate objects for
 * the same client of the same IdP, and each used to GET the IdP's metadata on its own.
 */
const discovered = new Map<string, Discovered>();

/**
 * A lazily discovered openid-client configuration for one confidential client of one
 * issuer, shared by every caller in the process with the same issuer and client. A first
 * discovery that fails is retried on the next call instead of being cached. The metadata is
 * looked up again once it is DISCOVERY_MAX_AGE_MS old, or after `invalidate()` (a grant that
 * failed other than by the IdP's refusal: an endpoint may have moved); while that lookup
 * fails the metadata in hand stays in use, and no lookup is tried more often than every
 * DISCOVERY_RETRY_MS, however many calls come. Plain http is allowed only because the dev
 * IdP runs on loopback http.
 */
export function oauthClientConfiguration(options: {
  issuer: string;
  clientId: string;
  clientSecret: string;
}): (() => Promise<oidc.Configuration>) & { invalidate(): void } {
  const key = [
    options.issuer,
    options.clientId,
    createHash('sha256').update(options.clientSecret).digest('hex'),
  ].join('\n');
  const discover = () =>
    oidc.discovery(
      new URL(options.issuer),
      options.clientId,
      options.clientSecret,
      oidc.ClientSecretBasic(),
      {
        [oidc.customFetch]: httpFetch,
        ...(options.issuer.startsWith('http://') ? { execute: [oidc.allowInsecureRequests] } : {}),
      },
    );
  const first = (): Discovered => {
    const now = performance.now();
    const entry: Discovered = {
      configuration: discover(),
      settled: false,
      fetchedAt: now,
      triedAt: now,
      stale: false,
    };
    entry.configuration.then(
      () => {
        entry.settled = true;
        entry.fetchedAt = entry.triedAt = performance.now();
      },
      () => {
        // Nothing in hand to fall back on: the next call discovers again.
        if (discovered.get(key) === entry) discovered.delete(key);
      },
    );
    return entry;
  };
  const refresh = (entry: Discovered) =>
    (entry.refreshing ??= discover().then(
      (configuration) => {
        entry.configuration = Promise.resolve(configuration);
        entry.stale = false;
        entry.fetchedAt = entry.triedAt = performance.now();
        entry.refreshing = undefined;
      },
      () => {
        // Unreachable or broken meanwhile: keep what we have, try again later.
        entry.triedAt = performance.now();
        entry.refreshing = undefined;
      },
    ));
  const get = async () => {
    let entry = discovered.get(key);
    if (!entry) {
      entry = first();
      discovered.set(key, entry);
    }
    if (entry.refreshing) await entry.refreshing;
    else if (entry.settled) {
      const now = performance.now();
      const due = entry.stale || now - entry.fetchedAt >= DISCOVERY_MAX_AGE_MS;
      if (due && now - entry.triedAt >= DISCOVERY_RETRY_MS) await refresh(entry);
    }
    return entry.configuration;
  };
  return Object.assign(get, {
    invalidate() {
      const entry = discovered.get(key);
      if (entry?.settled) entry.stale = true;
    },
  });
}
