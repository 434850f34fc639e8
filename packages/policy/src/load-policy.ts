import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { createPolicy, type Policy } from './create-policy.ts';
import { policyDocumentSchema } from './policy-document.ts';

export type PolicyFileErrorCode = 'policy_unreadable' | 'policy_syntax' | 'policy_invalid';

/** A policy file that cannot be used; the message names the file and every problem. */
export class PolicyFileError extends Error {
  readonly code: PolicyFileErrorCode;
  readonly file: string;
  readonly problems: string[];
  constructor(code: PolicyFileErrorCode, file: string, problems: string[]) {
    super(
      `policy file ${file}: ${problems.length === 1 ? problems[0] : '\n  ' + problems.join('\n  ')}`,
    );
    this.name = 'PolicyFileError';
    this.code = code;
    this.file = file;
    this.problems = problems;
  }
}

/**
 * Reads, parses (YAML for .yaml/.yml, JSON for .json) and validates a policy file. With
 * `knownTools`, naming a tool that does not exist is an error: it is almost always a typo,
 * and a typo in a deny-by-default policy locks a workload out without saying why.
 */
export async function loadPolicyFile(
  file: string,
  options: { knownTools?: Iterable<string> } = {},
): Promise<Policy> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new PolicyFileError('policy_unreadable', file, [
      `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    ]);
  }
  return parsePolicy(text, file, options);
}

/** Parses and validates policy text; `file` names its source and picks the syntax. */
export function parsePolicy(
  text: string,
  file: string,
  options: { knownTools?: Iterable<string> } = {},
): Policy {
  const ext = path.extname(file).toLowerCase();
  let raw: unknown;
  if (ext === '.json') {
    try {
      raw = JSON.parse(text);
    } catch (error) {
      throw new PolicyFileError('policy_syntax', file, [
        `not valid JSON: ${(error as Error).message}`,
      ]);
    }
  } else if (ext === '.yaml' || ext === '.yml') {
    const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
    if (doc.errors.length > 0) {
      throw new PolicyFileError(
        'policy_syntax',
        file,
        doc.errors.map((e) => `not valid YAML: ${e.message.split('\n')[0]}`),
      );
    }
    raw = doc.toJS({ maxAliasCount: 100 });
  } else {
    throw new PolicyFileError('policy_unreadable', file, ['must end in .yaml, .yml or .json']);
  }
  const known = options.knownTools ? new Set(options.knownTools) : undefined;
  const parsed = policyDocumentSchema(known).safeParse(raw ?? {});
  if (!parsed.success) {
    throw new PolicyFileError(
      'policy_invalid',
      file,
      parsed.error.issues.map((i) => `${pathOf(i.path) || '(top level)'}: ${i.message}`),
    );
  }
  return createPolicy(parsed.data, file);
}

/** `['workloads', 1, 'tools', 0]` → `workloads[1].tools[0]`. */
function pathOf(parts: readonly PropertyKey[]): string {
  return parts
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`))
    .join('');
}
