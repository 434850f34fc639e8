import { z } from 'zod';
import { parseSpiffeId } from './spiffe-id.ts';

/**
 * The policy file, as written (docs/identity.md, "Workload identity and per-tool policy").
 * Objects are strict: a misspelt key (`tool:` for `tools:`) is an error, not a rule that
 * silently does nothing.
 */
export function policyDocumentSchema(knownTools?: ReadonlySet<string>) {
  const known = (t: string) => !knownTools || knownTools.has(t);
  const toolName = z
    .string()
    .min(1)
    .refine((t) => t === '*' || known(t), { error: (i) => `unknown tool "${String(i.input)}"` });
  const workload = z
    .object({
      /** An OAuth client id (exact), or a SPIFFE ID whose path segments may be `*` / trailing `**`. */
      id: z
        .string()
        .min(1)
        .max(2048)
        .superRefine((id, ctx) => {
          const problem = idProblem(id);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
      /** Tools this workload may call; `'*'` for every tool. Empty: none on its own. */
      tools: z.array(toolName),
      /** SPIFFE entries only: OAuth clients whose tokens this workload may present; `'*'` any. */
      clients: z.array(z.string().min(1)).min(1).optional(),
    })
    .strict();
  const tool = z.object({ scopes: z.array(z.string().min(1)).min(1) }).strict();

  return z
    .object({
      workloads: z.array(workload).default([]),
      tools: z
        .record(z.string(), tool)
        .superRefine((tools, ctx) => {
          for (const name of Object.keys(tools)) {
            if (!known(name))
              ctx.addIssue({ code: 'custom', path: [name], message: `unknown tool "${name}"` });
          }
        })
        .default({}),
      default: z.enum(['deny', 'allow'], { error: 'must be "deny" or "allow"' }),
    })
    .strict()
    .superRefine((doc, ctx) => {
      const seen = new Set<string>();
      doc.workloads.forEach((w, i) => {
        if (seen.has(w.id)) {
          ctx.addIssue({
            code: 'custom',
            path: ['workloads', i, 'id'],
            message: `"${w.id}" is listed twice`,
          });
        }
        seen.add(w.id);
        if (w.clients && !w.id.startsWith('spiffe://')) {
          ctx.addIssue({
            code: 'custom',
            path: ['workloads', i, 'clients'],
            message: 'only a SPIFFE entry binds OAuth clients',
          });
        }
      });
    });
}

export type PolicyDocument = z.output<ReturnType<typeof policyDocumentSchema>>;

/** Why an entry id cannot be used, or undefined when it can. */
function idProblem(id: string): string | undefined {
  if (!id.startsWith('spiffe://')) {
    // OAuth client ids match exactly; `*` is kept free so a glob never reads as a literal.
    if (/\s|\*/.test(id))
      return 'an OAuth client id has no whitespace or "*" (globs are for SPIFFE IDs)';
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(id) && !/^https:\/\//.test(id)) {
      return 'a URI id must be a SPIFFE ID (spiffe://trust-domain/path) or an https client id';
    }
    return undefined;
  }
  const path = id.slice('spiffe://'.length).split('/');
  const segments = path.slice(1);
  const last = segments.length - 1;
  if (segments.some((s) => s !== '*' && s !== '**' && s.includes('*'))) {
    return '"*" matches whole path segments only';
  }
  if (segments.some((s, i) => s === '**' && i !== last))
    return '"**" is allowed only as the last path segment';
  // The rest must be a valid SPIFFE ID once globs are replaced by a literal segment.
  const literal = [
    'spiffe:/',
    path[0],
    ...segments.map((s) => (s === '*' || s === '**' ? 'x' : s)),
  ].join('/');
  if (!parseSpiffeId(literal)) return `"${id}" is not a valid SPIFFE ID`;
  return undefined;
}
