import { readFileSync } from 'node:fs';
import path from 'node:path';

type Exports = string | { [condition: string]: Exports } | undefined;

interface ProjectManifest {
  name?: string;
  exports?: Exports;
  main?: string;
  workspaces?: unknown;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

/** The file `exports["."]` names, preferring the `development` condition (the sources). */
function entryOf(exports: Exports): string | undefined {
  if (exports === undefined || typeof exports === 'string') return exports;
  const dot = '.' in exports ? exports['.'] : exports;
  if (typeof dot === 'string' || dot === undefined) return dot;
  for (const condition of ['development', 'import', 'default']) {
    const found = entryOf(dot[condition]);
    if (found) return found;
  }
  return undefined;
}

/**
 * The pack `dev` serves when TOOL_PACKS is unset: the project in `cwd`, when it is a pack
 * (its package.json depends on @mtg/tool-kit), as the path of its entry module. Undefined
 * elsewhere (this repository, which serves the demo pack).
 */
export function projectPack(cwd: string): { name: string; entry: string } | undefined {
  let manifest: ProjectManifest;
  try {
    manifest = JSON.parse(readFileSync(path.join(cwd, 'package.json'), 'utf8')) as ProjectManifest;
  } catch {
    return undefined;
  }
  const kit =
    manifest.dependencies?.['@mtg/tool-kit'] ?? manifest.devDependencies?.['@mtg/tool-kit'];
  if (!kit || manifest.workspaces) return undefined;
  const entry = entryOf(manifest.exports) ?? manifest.main;
  if (!entry) return undefined;
  return { name: manifest.name ?? path.basename(cwd), entry: path.resolve(cwd, entry) };
}
