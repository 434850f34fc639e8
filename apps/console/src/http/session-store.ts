import { nowMs, type Clock } from '@mtg/clock';
import { createHash, randomBytes } from 'node:crypto';
import type { Pool } from '@mtg/db';
import type { CredentialCipher } from '@mtg/identity';
import type { ConsoleRole } from '../auth/roles.ts';

/** A person logged in: who, in which tenant, as what, and the token the console acts with. */
export interface ConsolePrincipal {
  subject: string;
  tenant: string;
  client: string;
  role: ConsoleRole;
  scopes: string[];
  accessToken: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  /** The token's `iat` (seconds since the epoch): a revocation after it ends the session. */
  issuedAt?: number;
}

/**
 * The outcome of an action, shown once on the next page. Only the console sets it (in the
 * sealed session): a notice never comes from the URL, which anyone can write.
 */
export interface Flash {
  kind: 'ok' | 'bad';
  text: string;
}

export interface Session {
  id: string;
  /** Sent with every form; a POST without it is refused. */
  csrf: string;
  expiresAt: number;
  /** Between /login and /auth/callback. */
  login?: { state: string; codeVerifier: string; role: ConsoleRole };
  principal?: ConsolePrincipal;
  flash?: Flash;
}

/** What is sealed in a row: everything of the session but its id. */
type Sealed = Pick<Session, 'csrf' | 'login' | 'principal' | 'flash'>;

const LOGIN_TTL_S = 10 * 60;
/** Idle timeout by default: a session nobody used for this long is over. */
export const DEFAULT_IDLE_S = 30 * 60;

/** The row key: SHA-256 of the id. The id itself (the cookie) is never stored. */
export function sessionIdHash(id: string): Buffer {
  return createHash('sha256').update(id).digest();
}

/**
 * Sessions in PostgreSQL (app.console_sessions), so every console replica accepts the same
 * cookie and a restart logs nobody out. A row is keyed by the id's hash and holds the rest
 * sealed (AES-256-GCM, the gateway's credential cipher) and bound to that hash; expiry and
 * the idle timeout are the database's clock, shared by the replicas. Ids and CSRF tokens are
 * 256-bit random values.
 */
export function createSessionStore(deps: {
  pool: Pool;
  cipher: CredentialCipher;
  /** Seconds without a request after which a session ends. */
  idleSeconds?: number;
  /** When a login under way expires (default: the system clock). */
  clock?: Clock;
}) {
  const { pool, cipher } = deps;
  const idle = deps.idleSeconds ?? DEFAULT_IDLE_S;
  const token = () => randomBytes(32).toString('base64url');
  const bound = (hash: Buffer, kind: string) => `console-session:${kind}:${hash.toString('hex')}`;

  function seal(session: Session) {
    const kind = session.principal ? 'principal' : 'login';
    const hash = sessionIdHash(session.id);
    const content: Sealed = {
      csrf: session.csrf,
      ...(session.login ? { login: session.login } : {}),
      ...(session.principal ? { principal: session.principal } : {}),
      ...(session.flash ? { flash: session.flash } : {}),
    };
    return { kind, hash, sealed: cipher.seal(JSON.stringify(content), bound(hash, kind)) };
  }

  async function insert(session: Session): Promise<void> {
    const { kind, hash, sealed } = seal(session);
    await pool.query(
      `INSERT INTO app.console_sessions (id_hash, kind, key_id, iv, ciphertext, tag, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))`,
      [hash, kind, sealed.keyId, sealed.iv, sealed.ciphertext, sealed.tag, session.expiresAt],
    );
  }

  /** Deletes expired and idle sessions; returns how many. */
  async function purge(): Promise<number> {
    const r = await pool.query(
      `DELETE FROM app.console_sessions
        WHERE expires_at <= now() OR last_seen_at <= now() - $1 * interval '1 second'`,
      [idle],
    );
    return r.rowCount ?? 0;
  }

  /** Logout: the row goes, so no replica accepts the cookie again. */
  async function end(id: string): Promise<void> {
    await pool.query(`DELETE FROM app.console_sessions WHERE id_hash = $1`, [sessionIdHash(id)]);
  }

  /** Seals the session's content again (same id, kind and expiry), e.g. with a new flash. */
  async function reseal(session: Session): Promise<void> {
    const { hash, sealed } = seal(session);
    await pool.query(
      `UPDATE app.console_sessions SET key_id = $2, iv = $3, ciphertext = $4, tag = $5
        WHERE id_hash = $1`,
      [hash, sealed.keyId, sealed.iv, sealed.ciphertext, sealed.tag],
    );
  }

  return {
    end,
    purge,
    /** Keeps a notice for the next page of this session. */
    async setFlash(session: Session, flash: Flash): Promise<void> {
      await reseal({ ...session, flash });
    },
    /** The notice kept for this page, if any; it is shown once. */
    async takeFlash(session: Session): Promise<Flash | undefined> {
      const { flash, ...rest } = session;
      if (!flash) return undefined;
      await reseal(rest);
      delete session.flash;
      return flash;
    },
    /**
     * The session of a cookie, if it is neither expired nor idle; using it counts as activity.
     * Ids that are not ours (wrong shape) cost no query.
     */
    async get(id: string | undefined): Promise<Session | undefined> {
      if (!id || !/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
      const hash = sessionIdHash(id);
      const { rows } = await pool.query<{
        kind: string;
        key_id: string;
        iv: Buffer;
        ciphertext: Buffer;
        tag: Buffer;
        expires_at: number;
      }>(
        `UPDATE app.console_sessions SET last_seen_at = now()
          WHERE id_hash = $1 AND expires_at > now()
            AND last_seen_at > now() - $2 * interval '1 second'
          RETURNING kind, key_id, iv, ciphertext, tag,
                    extract(epoch FROM expires_at)::bigint::int AS expires_at`,
        [hash, idle],
      );
      const row = rows[0];
      if (!row) return undefined;
      let content: Sealed;
      try {
        content = JSON.parse(
          cipher.open(
            { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag },
            bound(hash, row.kind),
          ),
        ) as Sealed;
      } catch {
        // Sealed under a key this console no longer has, or not by a console: no session.
        return undefined;
      }
      if ((row.kind === 'principal') !== Boolean(content.principal)) return undefined;
      return { id, expiresAt: row.expires_at, ...content };
    },
    /** A new session for a login under way; also purges the ended ones. */
    async startLogin(login: NonNullable<Session['login']>): Promise<Session> {
      await purge();
      const expiresAt = Math.floor(nowMs(deps.clock) / 1000) + LOGIN_TTL_S;
      const s: Session = { id: token(), csrf: token(), expiresAt, login };
      await insert(s);
      return s;
    },
    /** Ends the login session and opens a fresh one (new id and CSRF token) for the principal. */
    async establish(previous: Session, principal: ConsolePrincipal): Promise<Session> {
      await end(previous.id);
      const s: Session = { id: token(), csrf: token(), expiresAt: principal.expiresAt, principal };
      await insert(s);
      return s;
    },
  };
}

export type SessionStore = ReturnType<typeof createSessionStore>;
