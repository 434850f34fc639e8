import { fileURLToPath } from 'node:url';
import { loadToolRegistry, RegistryError } from '@mtg/tools';
import { runMain } from '../support/run-main.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const fixture = (name: string) => `./test/fixtures/packs/${name}.ts`;

describe.each(['gateway', 'worker'] as const)(
  'the %s refuses to start, exit 2, naming the fault',
  (app) => {
    test('two packs that define the same tool name', async () => {
      const r = await runMain(app, {
        TOOL_PACKS: `@mtg/demo-tools,${fixture('duplicate-of-demo')}`,
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        'tool generate_report is defined twice: by pack @mtg/demo-tools and by pack duplicate-of-demo',
      );
    });

    test('a pack that fails to load', async () => {
      const r = await runMain(app, { TOOL_PACKS: fixture('fails-to-load') });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`pack ${fixture('fails-to-load')} failed to load`);
      expect(r.stderr).toContain('the CRM client could not be configured');
    });

    test('a pack that is not there', async () => {
      const r = await runMain(app, { TOOL_PACKS: '@acme/no-such-pack' });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('pack @acme/no-such-pack was not found');
    });

    test('a pack built for a tool kit this process does not serve, naming both versions', async () => {
      const r = await runMain(app, {
        TOOL_PACKS: '@mtg/demo-tools,./test/fixtures/packs/kit-future',
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /pack @fixture\/kit-future needs @mtg\/tool-kit \^9\.0\.0; this gateway serves \d+(\.\d+)?\.x \(\d+\.\d+\.\d+\)/,
      );
      expect(r.stderr).not.toContain('the code of a pack built for another kit ran');
    });

    test("a value the pack's configuration schema refuses", async () => {
      const r = await runMain(app, {
        TOOL_PACKS: fixture('needs-config'),
        FIXTURE_BATCH_SIZE: 'lots',
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/pack needs-config: invalid configuration: FIXTURE_BATCH_SIZE: /);
    });
  },
);

test('the worker refuses WORKER_TOOLS naming a tool no pack brings', async () => {
  const r = await runMain('worker', { WORKER_TOOLS: 'generate_report,no_such_tool' });
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('WORKER_TOOLS names no_such_tool');
});

test('the registry derives scopes, names, queues and a fingerprint that follows the schemas', async () => {
  const load = (schema: string) =>
    loadToolRegistry({
      packs: ['@mtg/demo-tools', fixture('versioned')],
      env: { FIXTURE_SCHEMA: schema },
      baseDir: root,
    });
  const v1 = await load('v1');
  expect(v1.names()).toEqual([
    'provision_test_environment',
    'generate_report',
    'bulk_update_records',
    'versioned_echo',
  ]);
  // records:approve: the approval scope bulk_update_records asks a second person for.
  expect(v1.scopes()).toEqual(['env:provision', 'records:approve', 'records:write', 'reports:run']);
  expect(v1.targets()).toEqual(['downstream']);
  const again = await load('v1');
  const v2 = await load('v2');
  expect(again.fingerprint).toBe(v1.fingerprint);
  expect(v2.fingerprint).not.toBe(v1.fingerprint);
  // Only the changed tool moves to another queue.
  expect(v2.queues().get('versioned_echo')).not.toBe(v1.queues().get('versioned_echo'));
  expect(v2.queues().get('generate_report')).toBe(v1.queues().get('generate_report'));

  await expect(
    loadToolRegistry({ packs: ['@mtg/demo-tools'], env: {}, limits: { nope: { retentionMs: 1 } } }),
  ).rejects.toThrow(RegistryError);
});
