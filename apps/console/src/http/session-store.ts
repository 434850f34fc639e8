import { randomBytes } from 'node:crypto';
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
}

export interface Session {
  id: string;
  /** Sent with every form; a POST without it is refused. */
  csrf: string;
  expiresAt: number;
  /** Between /login and /auth/callback. */
  login?: { state: string; codeVerifier: string; role: ConsoleRole };
  principal?: ConsolePrincipal;
}

const LOGIN_TTL_S = 10 * 60;

/**
 * Sessions in memory: a restart logs everyone out, which suits a console (the IdP's own
 * session lets them back in). Ids and CSRF tokens are 256-bit random values.
 */
export function createSessionStore(now: () => number = () => Date.now()) {
  const sessions = new Map<string, Session>();
  const token = () => randomBytes(32).toString('base64url');
  const seconds = () => Math.floor(now() / 1000);

  return {
    get(id: string | undefined): Session | undefined {
      if (!id) return undefined;
      const s = sessions.get(id);
      if (!s) return undefined;
      if (s.expiresAt <= seconds()) {
        sessions.delete(id);
        return undefined;
      }
      return s;
    },
    /** A new session for a login under way. */
    startLogin(login: NonNullable<Session['login']>): Session {
      const s: Session = { id: token(), csrf: token(), expiresAt: seconds() + LOGIN_TTL_S, login };
      sessions.set(s.id, s);
      return s;
    },
    /** Ends the login session and opens a fresh one (new id and CSRF token) for the principal. */
    establish(previous: Session, principal: ConsolePrincipal): Session {
      sessions.delete(previous.id);
      const s: Session = { id: token(), csrf: token(), expiresAt: principal.expiresAt, principal };
      sessions.set(s.id, s);
      return s;
    },
    end(id: string): void {
      sessions.delete(id);
    },
  };
}

export type SessionStore = ReturnType<typeof createSessionStore>;
