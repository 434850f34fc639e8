import { defineLongTool, definePack, defineTool } from '@mtg/tool-kit';
import { z } from 'zod';
import { createCatalogue, createRegistry, RegistryError, whoami } from '../src/index.ts';

const long = (name: string, input: z.ZodType = z.object({ a: z.string() })) =>
  defineLongTool({
    name,
    title: name,
    description: name,
    input,
    scope: 'x:run',
    summarize: () => ({}),
    execute: async () => ({}),
  });
const pack = (name: string, tools: ReturnType<typeof long>[], version = '1.0.0') =>
  definePack({ name, version, targets: ['crm'], tools });

test('a tool name two packs bring is refused, naming both packs', () => {
  expect(() =>
    createRegistry([
      { pack: pack('one', [long('sync')]), config: {} },
      { pack: pack('two', [long('sync')]), config: {} },
    ]),
  ).toThrow(
    expect.objectContaining({
      code: 'duplicate_tool',
      message: 'tool sync is defined twice: by pack one and by pack two',
    }),
  );
});

test('TOOL_LIMITS may name only long tools of the loaded packs; it overrides their limits', () => {
  const r = createRegistry([{ pack: pack('one', [long('sync')]), config: {} }], {
    limits: { sync: { retentionMs: 1234 } },
  });
  expect(r.long.get('sync')!.limits.retentionMs).toBe(1234);
  expect(() =>
    createRegistry([{ pack: pack('one', [long('sync')]), config: {} }], {
      limits: { other: { retentionMs: 1 } },
    }),
  ).toThrow(RegistryError);
});

test('each tool carries its pack, version and targets; the fingerprint moves with schema and version', () => {
  const a = createRegistry([{ pack: pack('one', [long('sync')]), config: {} }]);
  expect(a.long.get('sync')!.origin).toEqual({
    pack: 'one',
    version: '1.0.0',
    targets: ['crm'],
    upstreams: [],
  });
  const schema = createRegistry([
    { pack: pack('one', [long('sync', z.object({ a: z.string(), b: z.number() }))]), config: {} },
  ]);
  const version = createRegistry([{ pack: pack('one', [long('sync')], '1.0.1'), config: {} }]);
  expect(schema.entry('sync')!.fingerprint).not.toBe(a.entry('sync')!.fingerprint);
  expect(schema.queues().get('sync')).not.toBe(a.queues().get('sync'));
  // A new version with the same schemas keeps the queue: its tasks are runnable by both.
  expect(version.queues().get('sync')).toBe(a.queues().get('sync'));
  expect(version.fingerprint).not.toBe(a.fingerprint);
});

test("the gateway's catalogue refuses a pack tool that takes a gateway tool's name", () => {
  const shadow = defineTool({
    name: 'whoami',
    title: 'x',
    description: 'x',
    input: z.object({}),
    run: async () => ({}),
  });
  expect(() =>
    createCatalogue([whoami, { ...whoami, run: shadow.run.bind(shadow) as never }]),
  ).toThrow(expect.objectContaining({ code: 'duplicate_tool' }));
});

test('each tool carries the upstreams its pack declared (none when it declared none); a bad upstream name is refused', () => {
  const r = createRegistry([
    {
      pack: definePack({ name: 'up', version: '1.0.0', upstreams: ['demo'], tools: [long('a')] }),
      config: {},
    },
    { pack: pack('plain', [long('b')]), config: {} },
  ]);
  expect(r.long.get('a')!.origin!.upstreams).toEqual(['demo']);
  expect(r.long.get('b')!.origin!.upstreams).toEqual([]);
  expect(() =>
    definePack({ name: 'bad', version: '1.0.0', upstreams: ['Demo.Upstream'], tools: [] }),
  ).toThrow('pack bad: upstream name "Demo.Upstream" must match');
});
