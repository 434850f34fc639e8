// An upstream tool without task support runs as one plain tools/call inside our task: while
// it runs, our task's status says what it calls where, then how long it has been running,
// then the progress the upstream reports (the demo upstream's export_ledger: four parts, each
// announced with a progress notification after DEMO step time).
import { pollUntil } from '../support/poll.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire } from '../support/wires.ts';

let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
beforeAll(async () => {
  // The first part takes longer than the 3 s after which a silent call says how long it ran.
  upstreams = await planUpstreams({ demoStepMs: 4000 });
  await upstreams.start();
  stack = await startStack({
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
});
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

test('a plain upstream call as a core task: its status names the call, its elapsed time, then the upstream progress', async () => {
  const token = await stack.token('alice', 'acme');
  const w = coreWire(stack.mcpUrl);
  const id = await w.start(token, 'demo.export_ledger', { ledger: 'slow' });
  const said: string[] = [];
  const status = async () => {
    const r = await w.get(token, id);
    if (r.ok && said[said.length - 1] !== r.value.statusMessage) said.push(r.value.statusMessage);
    return r;
  };
  const saying = (pattern: RegExp) =>
    pollUntil(status, (r) => r.ok && pattern.test(r.value.statusMessage ?? ''), 15_000, 100);
  await saying(/^calling export_ledger on demo$/);
  const running = await saying(/^calling export_ledger on demo \(\d+ s\)$/);
  expect(running.ok && running.value.status).toBe('working');
  await saying(/^part 1 of 4$/);
  // Never the bare "started" of a task whose status nobody set, once the call is under way.
  expect(said.slice(said.indexOf('calling export_ledger on demo'))).not.toContain('started');
  expect((await w.cancel(token, id)).ok).toBe(true);
}, 40_000);
