// `npm run pack`: builds every workspace (tsc) and packs each as a tarball a team installs
// with plain `npm install` (docs/packaging.md). In this repository a workspace's exports name
// its TypeScript sources, which Node runs by type stripping; a published package must not (Node
// refuses to strip types under node_modules), so each package is staged with its dist/ and a
// package.json whose exports and bin name the built files, as pnpm rewrites `workspace:`
// ranges when it publishes.
import { execFileSync } from 'node:child_process';
import { cp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({
  options: { out: { type: 'string' }, 'skip-build': { type: 'boolean' } },
});
const out = path.resolve(values.out ?? path.join(root, '.pack', 'tarballs'));
const buildDir = path.join(root, '.build');
const stageRoot = path.join(root, '.pack', 'stage');

type Exports = string | { [key: string]: Exports };
interface Manifest {
  name: string;
  version: string;
  exports?: Exports;
  bin?: Record<string, string>;
  files?: string[];
  engines?: Record<string, string>;
  [key: string]: unknown;
}

/** `./src/x.ts` → the built `./dist/x.js` with its declarations beside it. */
function builtEntry(source: string): Exports {
  const match = /^\.\/src\/(.+)\.ts$/.exec(source);
  if (!match) throw new Error(`export ${source} is not a ./src/*.ts file`);
  return { types: `./dist/${match[1]}.d.ts`, default: `./dist/${match[1]}.js` };
}

function builtExports(exports: Exports): Exports {
  if (typeof exports === 'string') return builtEntry(exports);
  return Object.fromEntries(Object.entries(exports).map(([k, v]) => [k, builtExports(v)]));
}

export function publishedManifest(manifest: Manifest, engines: Record<string, string>): Manifest {
  const published: Manifest = { ...manifest, engines: manifest.engines ?? engines };
  if (manifest.exports) published.exports = builtExports(manifest.exports);
  if (manifest.bin) {
    published.bin = Object.fromEntries(
      Object.entries(manifest.bin).map(([k, v]) => [
        k,
        v.replace(/^\.\/src\/(.+)\.ts$/, './dist/$1.js'),
      ]),
    );
  }
  published.files = ['dist', ...(manifest.files ?? []).filter((f) => f !== 'dist')];
  delete published.scripts;
  delete published.devDependencies;
  return published;
}

async function workspaces(): Promise<string[]> {
  const dirs: string[] = [];
  for (const group of ['packages', 'apps']) {
    for (const name of (await readdir(path.join(root, group))).sort()) {
      dirs.push(path.join(group, name));
    }
  }
  return dirs;
}

async function stage(dir: string, engines: Record<string, string>): Promise<string> {
  const manifest = JSON.parse(
    await readFile(path.join(root, dir, 'package.json'), 'utf8'),
  ) as Manifest;
  const target = path.join(stageRoot, dir);
  await rm(target, { recursive: true, force: true });
  await mkdir(target, { recursive: true });
  // The compiled sources, then what tsc does not copy (the console's stylesheet and scripts).
  await cp(path.join(buildDir, dir, 'src'), path.join(target, 'dist'), { recursive: true });
  await cp(path.join(root, dir, 'src'), path.join(target, 'dist'), {
    recursive: true,
    filter: (file) => !file.endsWith('.ts'),
  });
  for (const extra of manifest.files ?? []) {
    if (extra !== 'dist')
      await cp(path.join(root, dir, extra), path.join(target, extra), { recursive: true });
  }
  for (const doc of ['README.md', 'CHANGELOG.md']) {
    await cp(path.join(root, dir, doc), path.join(target, doc)).catch(() => {});
  }
  await cp(path.join(root, 'LICENSE'), path.join(target, 'LICENSE')).catch(() => {});
  await writeFile(
    path.join(target, 'package.json'),
    `${JSON.stringify(publishedManifest(manifest, engines), null, 2)}\n`,
  );
  return target;
}

async function main(): Promise<void> {
  if (!values['skip-build']) {
    await rm(buildDir, { recursive: true, force: true });
    execFileSync(
      process.execPath,
      [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: root,
        stdio: 'inherit',
      },
    );
  }
  const rootManifest = JSON.parse(
    await readFile(path.join(root, 'package.json'), 'utf8'),
  ) as Manifest;
  await mkdir(out, { recursive: true });
  for (const dir of await workspaces()) {
    const staged = await stage(dir, rootManifest.engines ?? {});
    const file = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], {
      cwd: staged,
      encoding: 'utf8',
    }).trim();
    process.stdout.write(`${path.join(out, file)}\n`);
  }
}

if (import.meta.filename === process.argv[1]) await main();
