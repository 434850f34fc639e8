import type { JSONWebKeySet } from 'jose';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { GatewayActions } from '../actions/gateway-actions.ts';
import type { SessionStore } from '../http/session-store.ts';

/** What the auditor and operator pages are given. */
export interface AuditRouteDeps {
  /** Sessions as mtg_auditor: the audit views only. */
  pool: Pool;
  logger: Logger;
  actions: GatewayActions;
  /** The checkpoint signing keys' public JWKS, when configured. */
  keys: () => Promise<JSONWebKeySet | undefined>;
  now: () => Date;
  /** Where an action's outcome is kept for the next page. */
  sessions: SessionStore;
}
