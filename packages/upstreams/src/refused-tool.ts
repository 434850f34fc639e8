/**
 * Why a tool an upstream listed is not served. Each refusal concerns that one tool: the
 * upstream's other tools, and every other upstream, are served as usual.
 * - reserved_name: its served name is a gateway tool's (job tools, whoami, a pack's tool).
 * - over_cap: the upstream listed more than its `maxTools`.
 * - invalid_name: prefix + name is not a valid MCP tool name.
 * - duplicate_name: the same listing named it twice (the first is served).
 * - name_taken: another configured upstream already serves that name (only when replicas
 *   run different UPSTREAMS_FILEs: one file's prefixes cannot overlap).
 */
export type RefusalReason =
  'reserved_name' | 'over_cap' | 'invalid_name' | 'duplicate_name' | 'name_taken';

export interface RefusedTool {
  upstream: string;
  /** The upstream's own name for the tool. */
  upstreamName: string;
  /** The name it would have been served under (none when it cannot be one). */
  name: string | null;
  reason: RefusalReason;
}
