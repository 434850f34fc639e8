import { nowMs } from '@mtg/clock';
import type { Adapter, AdapterFactory, AdapterPayload } from 'oidc-provider';

interface Entry {
  payload: AdapterPayload;
  /** Epoch ms; undefined: no expiry. */
  expiresAt?: number;
}

const SWEEP_EVERY = 500;

/**
 * oidc-provider's storage for sessions, interactions, codes, refresh tokens and registered
 * clients: process memory, one store per IdP instance (the built-in adapter is one store per
 * process and warns on every start). A restart forgets all of it: users log in again, and
 * dynamically registered clients register again. JWT access tokens are never stored.
 */
export function memoryAdapterFactory(now: () => number = nowMs): AdapterFactory {
  const entries = new Map<string, Entry>();
  const grants = new Map<string, Set<string>>();
  // Secondary indexes: "<model> uid <uid>" and "<model> userCode <code>" to the entry id.
  const indexes = new Map<string, string>();
  let writes = 0;

  const live = (key: string): Entry | undefined => {
    const entry = entries.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= now()) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  };

  const sweep = () => {
    for (const key of entries.keys()) live(key);
    for (const [index, id] of indexes) {
      if (!entries.has(`${index.split(' ')[0]}:${id}`)) indexes.delete(index);
    }
  };

  return (model: string): Adapter => {
    const keyFor = (id: string) => `${model}:${id}`;
    return {
      async upsert(id, payload, expiresIn) {
        const key = keyFor(id);
        entries.set(key, {
          payload,
          expiresAt: expiresIn ? now() + expiresIn * 1000 : undefined,
        });
        if (payload.grantId) {
          const members = grants.get(payload.grantId) ?? new Set<string>();
          members.add(key);
          grants.set(payload.grantId, members);
        }
        if (payload.uid) indexes.set(`${model} uid ${payload.uid}`, id);
        if (payload.userCode) indexes.set(`${model} userCode ${payload.userCode}`, id);
        if (++writes % SWEEP_EVERY === 0) sweep();
      },
      async find(id) {
        return live(keyFor(id))?.payload;
      },
      async findByUid(uid) {
        const id = indexes.get(`${model} uid ${uid}`);
        return id === undefined ? undefined : live(keyFor(id))?.payload;
      },
      async findByUserCode(userCode) {
        const id = indexes.get(`${model} userCode ${userCode}`);
        return id === undefined ? undefined : live(keyFor(id))?.payload;
      },
      async consume(id) {
        const entry = live(keyFor(id));
        if (entry) entry.payload.consumed = Math.floor(now() / 1000);
      },
      async destroy(id) {
        entries.delete(keyFor(id));
      },
      async revokeByGrantId(grantId) {
        for (const key of grants.get(grantId) ?? []) entries.delete(key);
        grants.delete(grantId);
      },
    };
  };
}
