import { createHash } from 'node:crypto';
import { canonicalJson } from '@mtg/audit';
import { TOOL_NAME } from '@mtg/tool-kit';
import type { UpstreamConfig } from './upstream-config.ts';

/** The name the gateway serves an upstream tool under, or undefined when it cannot be one. */
export function servedName(upstream: UpstreamConfig, upstreamName: string): string | undefined {
  const name = `${upstream.prefix}${upstreamName}`;
  return TOOL_NAME.test(name) ? name : undefined;
}

/** Whether include/exclude admit an upstream tool. */
export function admitted(upstream: UpstreamConfig, upstreamName: string): boolean {
  if (upstream.include && !upstream.include.includes(upstreamName)) return false;
  return !upstream.exclude.includes(upstreamName);
}

export function catalogueFingerprint(entry: {
  upstream: string;
  name: string;
  upstreamName: string;
  inputSchema: unknown;
  taskSupport: string;
}): string {
  return createHash('sha256').update(canonicalJson(entry)).digest('hex');
}
