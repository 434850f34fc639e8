import type { ServedTool } from '../src/run-task.ts';
import { servedFingerprints } from '../src/check-servable.ts';

// check-servable.ts: the claim checks the tools the worker serves now. A worker's map changes
// while it runs (upstream task tools follow the stored catalogue), so a tool that joins it, or
// changes its schema, after the worker's first claim is claimed at what the map says then.
test('the fingerprints a claim checks follow the served map as it changes', () => {
  const tool = (fingerprint: string) => ({ tool: {}, fingerprint }) as unknown as ServedTool;
  const served = new Map<string, ServedTool>([['pack_tool', tool('a1')]]);
  expect(servedFingerprints(served)).toEqual(new Map([['pack_tool', 'a1']]));
  served.set('demo.build_artifact', tool('b1'));
  expect(servedFingerprints(served)).toEqual(
    new Map([
      ['pack_tool', 'a1'],
      ['demo.build_artifact', 'b1'],
    ]),
  );
  served.set('demo.build_artifact', tool('b2'));
  served.delete('pack_tool');
  expect(servedFingerprints(served)).toEqual(new Map([['demo.build_artifact', 'b2']]));
});
