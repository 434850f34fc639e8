import type { TargetConfig, ToolRegistry } from '@mtg/tools';
import type { Resources } from './resources.ts';

/**
 * What the dev IdP must know of the loaded packs: the scopes of their tools (plus the
 * gateway's `tasks:admin`) and the audiences of their targets, so it can issue a token for
 * each. Derived from the same registry and targets the gateway and workers load.
 */
export function packResources(
  registry: Pick<ToolRegistry, 'scopes'>,
  targets: ReadonlyMap<string, TargetConfig>,
  base: Pick<Resources, 'downstream'>,
): Pick<Resources, 'scopes' | 'targets'> {
  return {
    scopes: [...new Set([...registry.scopes(), 'tasks:admin', 'audit:read'])],
    targets: [...new Set([...targets.values()].map((t) => t.audience))].filter(
      (a) => a !== base.downstream,
    ),
  };
}
