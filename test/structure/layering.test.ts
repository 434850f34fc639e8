import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

// The layering of .dependency-cruiser.cjs, run as part of `npm test` (the same check as
// `npm run lint:layers`), and the rule a cruise cannot see in a workspace: every bare import
// in a workspace's src/ is declared in that workspace's package.json, so the package installs
// and runs outside this repository's hoisted node_modules.
const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

test('no import breaks the layering (dependency-cruiser)', async () => {
  const cli = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');
  const args = [cli, '--config', '.dependency-cruiser.cjs', '--output-type', 'err'];
  const result = await run(
    process.execPath,
    [...args, 'apps', 'packages', 'test', 'scripts', 'examples'],
    {
      cwd: root,
    },
  ).then(
    (r) => ({ code: 0, out: r.stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
  );
  // The cruise's own report names each rule and the file → dependency that broke it.
  expect(result.out.trim()).toMatch(/no dependency violations found/);
  expect(result.code).toBe(0);
}, 120_000);

const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s(?:[^'";]*?\sfrom\s)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|js|mjs)$/.test(entry) && !entry.endsWith('.test.ts') ? [path] : [];
  });
}

const packageName = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

const builtins = new Set(builtinModules);

/** Bare imports in a workspace's src/ that its package.json does not declare. */
function undeclared(workspace: string): string[] {
  const manifest = JSON.parse(readFileSync(join(root, workspace, 'package.json'), 'utf8')) as {
    name: string;
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
  const declared = new Set([
    manifest.name,
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
    ...Object.keys(manifest.optionalDependencies ?? {}),
  ]);
  const missing: string[] = [];
  for (const file of sourceFiles(join(root, workspace, 'src'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(SPECIFIER)) {
      const specifier = m[1] ?? m[2]!;
      if (/^[./]/.test(specifier) || specifier.startsWith('node:')) continue;
      const name = packageName(specifier);
      if (builtins.has(name) || declared.has(name)) continue;
      missing.push(`${file.slice(root.length)} imports ${specifier}`);
    }
  }
  return missing;
}

const workspaces = ['apps', 'packages'].flatMap((top) =>
  readdirSync(join(root, top))
    .map((name) => `${top}/${name}`)
    .filter((dir) => statSync(join(root, dir, 'src'), { throwIfNoEntry: false })?.isDirectory()),
);

test('the check sees every workspace', () => {
  expect(workspaces).toEqual(expect.arrayContaining(['apps/cli', 'apps/gateway', 'packages/db']));
});

test.each(workspaces)('every bare import in %s/src is declared in its package.json', (ws) => {
  expect(undeclared(ws)).toEqual([]);
});
