import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadToolRegistry } from '../src/index.ts';
import { breakingLine, rangeAdmits } from '../src/registry/kit-range.ts';

const root = fileURLToPath(new URL('../../..', import.meta.url));
// The host's kit, as the kit's own package.json says (soon bumped: nothing here is pinned).
const host = (
  JSON.parse(readFileSync(new URL('../../tool-kit/package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;
const fixture = (name: string) => `./test/fixtures/packs/${name}`;

test('a range admits a version as npm reads it; for 0.x the minor is the breaking number', () => {
  for (const [range, version, admits] of [
    ['^0.2.0', '0.2.0', true],
    ['^0.2.0', '0.2.9', true],
    ['^0.2.0', '0.3.0', false],
    ['^0.2.0', '0.1.9', false],
    ['^0.2.3', '0.2.0', false],
    ['^1.0.0', '0.2.0', false],
    ['^1.0.0', '1.7.2', true],
    ['^1.0.0', '2.0.0', false],
    ['~0.2.1', '0.2.4', true],
    ['~1.2.0', '1.3.0', false],
    ['0.2.x', '0.2.7', true],
    ['0.2', '0.3.0', false],
    ['1', '1.9.9', true],
    ['*', '5.0.0', true],
    ['>=0.1.0 <0.3.0', '0.2.0', true],
    ['>= 0.1.0 < 0.3.0', '0.3.0', false],
    ['^0.1.0 || ^0.2.0', '0.2.1', true],
    ['0.1.0 - 0.2.5', '0.2.5', true],
    ['0.2.0', '0.2.1', false],
  ] as const) {
    expect([range, version, rangeAdmits(range, version)]).toEqual([range, version, admits]);
  }
  expect(rangeAdmits('github:acme/kit', '0.2.0')).toBeUndefined();
  expect(rangeAdmits('latest', '0.2.0')).toBeUndefined();
  expect([breakingLine('0.2.4'), breakingLine('1.4.0'), breakingLine('0.0.3')]).toEqual([
    '0.2.x',
    '1.x',
    '0.0.3',
  ]);
});

test('a pack whose package.json asks for a kit this host does not serve is refused before its code runs, naming both versions', async () => {
  await expect(
    loadToolRegistry({ packs: [fixture('kit-future')], env: {}, baseDir: root, warn: () => {} }),
  ).rejects.toMatchObject({
    code: 'kit_incompatible',
    message: `pack @fixture/kit-future needs @mtg/tool-kit ^9.0.0; this gateway serves ${breakingLine(host)} (${host})`,
  });
});

test('a compatible pack loads without a warning: a caret range of the host kit, or a link to it', async () => {
  // A pack directory whose package.json asks for ^<host kit>, its module a fixture's.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-kit-pack-'));
  await writeFile(
    path.join(dir, 'package.json'),
    JSON.stringify({
      name: '@fixture/kit-caret',
      type: 'module',
      exports: { '.': './index.ts' },
      peerDependencies: { '@mtg/tool-kit': `^${host}` },
    }),
  );
  await writeFile(
    path.join(dir, 'index.ts'),
    `export { default } from ${JSON.stringify(path.join(root, 'test/fixtures/packs/versioned.ts'))};\n`,
  );
  const warnings: string[] = [];
  const registry = await loadToolRegistry({
    packs: [dir, fixture('kit-linked')],
    env: {},
    baseDir: root,
    warn: (m) => warnings.push(m),
  });
  expect(registry.names()).toEqual(['versioned_echo', 'linked_echo']);
  expect(warnings).toEqual([]);
});

test('a bare module with no kit dependency loads, with a warning that says so', async () => {
  const warnings: string[] = [];
  const registry = await loadToolRegistry({
    packs: [`${fixture('versioned')}.ts`],
    env: {},
    baseDir: root,
    warn: (m) => warnings.push(m),
  });
  expect(registry.names()).toEqual(['versioned_echo']);
  expect(warnings).toEqual([
    expect.stringMatching(
      /^pack .* declares no @mtg\/tool-kit range .*without a compatibility check$/,
    ),
  ]);
});

test('a pack directory with conditional exports loads its built module, not the development sources', async () => {
  // As the scaffold writes it: `development` names the sources `dev` runs, `default` the build.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-conditional-pack-'));
  await writeFile(
    path.join(dir, 'package.json'),
    JSON.stringify({
      name: '@fixture/conditional',
      type: 'module',
      exports: {
        '.': { development: './missing-sources.ts', types: './x.d.ts', default: './built.ts' },
      },
      peerDependencies: { '@mtg/tool-kit': `^${host}` },
    }),
  );
  await writeFile(
    path.join(dir, 'built.ts'),
    `export { default } from ${JSON.stringify(path.join(root, 'test/fixtures/packs/versioned.ts'))};\n`,
  );
  const registry = await loadToolRegistry({ packs: [dir], env: {}, baseDir: root, warn: () => {} });
  expect(registry.names()).toEqual(['versioned_echo']);
});
