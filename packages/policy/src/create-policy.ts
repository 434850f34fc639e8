import type { PolicyDocument } from './policy-document.ts';
import type { Workload } from './workload.ts';

/** Why the policy refused a call (recorded in the audit event's data, never shown). */
export type PolicyDenyRule =
  /** Neither the workload nor a pattern is listed, and `default: deny`. */
  | 'unlisted_workload'
  /** The workload's entry does not name the tool. */
  | 'tool_not_allowed'
  /** A SPIFFE workload presented a token of an OAuth client its entry does not bind. */
  | 'client_not_bound'
  /** The caller lacks scopes the policy's `tools:` section requires for the tool. */
  | 'missing_scopes';

export type PolicyDecision =
  | { allowed: true; entry: string | null }
  | { allowed: false; rule: PolicyDenyRule; entry: string | null; missingScopes?: string[] };

export interface Policy {
  /** Where the policy came from (a file path), for logs and error messages. */
  source: string;
  /** Whether `workload`, holding `scopes`, may call `tool`. */
  decide(workload: Workload, tool: string, scopes: readonly string[]): PolicyDecision;
}

type Entry = { id: string; tools: ReadonlySet<string>; clients?: ReadonlySet<string> };
type Pattern = Entry & { trustDomain: string; segments: string[] };

/**
 * Compiles a validated policy document. Rules (docs/identity.md):
 * - Without a SPIFFE ID the OAuth client's own entry decides; unlisted → `default`.
 * - With a SPIFFE ID its entry decides (exact id first, else the first matching pattern in
 *   file order), and the token's OAuth client must be bound to it: listed in the entry's
 *   `clients`, or, without `clients`, admitted on its own (listed, or `default: allow`).
 *   An unlisted SPIFFE ID is denied under `default: deny`; under `default: allow` it adds
 *   nothing and the OAuth client's own entry decides.
 * - Then the `tools:` section's scopes, for every caller.
 */
export function createPolicy(doc: PolicyDocument, source: string): Policy {
  const clients = new Map<string, Entry>();
  const spiffeExact = new Map<string, Entry>();
  const patterns: Pattern[] = [];
  for (const w of doc.workloads) {
    const entry: Entry = {
      id: w.id,
      tools: new Set(w.tools),
      ...(w.clients ? { clients: new Set(w.clients) } : {}),
    };
    if (!w.id.startsWith('spiffe://')) clients.set(w.id, entry);
    else if (!/\/\*\*?(\/|$)/.test(w.id)) spiffeExact.set(w.id, entry);
    else {
      const [trustDomain = '', ...segments] = w.id.slice('spiffe://'.length).split('/');
      patterns.push({ ...entry, trustDomain, segments });
    }
  }
  const toolScopes = new Map(Object.entries(doc.tools).map(([name, t]) => [name, t.scopes]));
  const allowByDefault = doc.default === 'allow';

  const permits = (entry: Entry, tool: string) => entry.tools.has('*') || entry.tools.has(tool);

  const byClient = (client: string, tool: string): PolicyDecision => {
    const entry = clients.get(client);
    if (!entry)
      return allowByDefault
        ? { allowed: true, entry: null }
        : { allowed: false, rule: 'unlisted_workload', entry: null };
    return permits(entry, tool)
      ? { allowed: true, entry: entry.id }
      : { allowed: false, rule: 'tool_not_allowed', entry: entry.id };
  };

  const bySpiffe = (id: string, client: string, tool: string): PolicyDecision => {
    const entry = spiffeExact.get(id) ?? patterns.find((p) => matches(p, id));
    if (!entry)
      return allowByDefault
        ? byClient(client, tool)
        : { allowed: false, rule: 'unlisted_workload', entry: null };
    const bound = entry.clients
      ? entry.clients.has('*') || entry.clients.has(client)
      : clients.has(client) || allowByDefault;
    if (!bound) return { allowed: false, rule: 'client_not_bound', entry: entry.id };
    return permits(entry, tool)
      ? { allowed: true, entry: entry.id }
      : { allowed: false, rule: 'tool_not_allowed', entry: entry.id };
  };

  return {
    source,
    decide(workload, tool, scopes) {
      const decision =
        workload.kind === 'spiffe'
          ? bySpiffe(workload.id, workload.client, tool)
          : byClient(workload.id, tool);
      if (!decision.allowed) return decision;
      const missing = (toolScopes.get(tool) ?? []).filter((s) => !scopes.includes(s));
      if (missing.length > 0)
        return {
          allowed: false,
          rule: 'missing_scopes',
          entry: decision.entry,
          missingScopes: missing,
        };
      return decision;
    },
  };
}

/** `*` matches one path segment, a trailing `**` one or more; the trust domain exactly. */
function matches(pattern: Pattern, id: string): boolean {
  const [trustDomain = '', ...segments] = id.slice('spiffe://'.length).split('/');
  if (!id.startsWith('spiffe://') || trustDomain !== pattern.trustDomain) return false;
  const p = pattern.segments;
  const subtree = p[p.length - 1] === '**';
  const fixed = subtree ? p.length - 1 : p.length;
  if (subtree ? segments.length <= fixed : segments.length !== fixed) return false;
  for (let i = 0; i < fixed; i++) {
    if (p[i] !== '*' && p[i] !== segments[i]) return false;
  }
  return true;
}
