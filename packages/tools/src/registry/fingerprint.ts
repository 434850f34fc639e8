import { createHash } from 'node:crypto';
import type { AnyTool } from '@mtg/tool-kit';
import { jsonSchemaOf } from '../tool-definition.ts';
import { canonicalJson } from '@mtg/audit';

/**
 * A tool's schema fingerprint: the hash of its input (and output) JSON Schema. Two processes
 * whose fingerprints for a tool agree accept the same arguments; a worker with another
 * fingerprint serves another queue and never sees the task.
 * The computation must not change between releases: in a rolling upgrade the new release's
 * workers take over tasks the old release created only when they compute the same value
 * (test/upgrade/rolling-upgrade.test.ts fails otherwise).
 */
export function toolFingerprint(tool: AnyTool): string {
  const schemas = {
    name: tool.name,
    kind: tool.kind,
    input: jsonSchemaOf(tool.inputSchema),
    output: tool.outputSchema ? jsonSchemaOf(tool.outputSchema) : null,
  };
  return createHash('sha256').update(canonicalJson(schemas)).digest('hex');
}

/** The registry's fingerprint: every tool's name, pack version and schema fingerprint. */
export function registryFingerprint(
  entries: Array<{ name: string; version: string; fingerprint: string }>,
): string {
  const lines = entries
    .map((e) => `${e.name}@${e.version}#${e.fingerprint}`)
    .sort()
    .join('\n');
  return createHash('sha256').update(lines).digest('hex');
}
