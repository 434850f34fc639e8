import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { breakingLine, rangeAdmits } from './kit-range.ts';
import { RegistryError } from './registry-error.ts';

export const KIT_PACKAGE = '@mtg/tool-kit';

interface Manifest {
  name?: unknown;
  version?: unknown;
  dependencies?: Record<string, unknown>;
  peerDependencies?: Record<string, unknown>;
  devDependencies?: Record<string, unknown>;
}

/** The package a module file belongs to: the nearest package.json above it (Node's rule). */
export function manifestOf(
  file: string,
  name?: string,
): { dir: string; manifest: Manifest } | undefined {
  let dir = path.dirname(file);
  for (;;) {
    const candidate = path.join(dir, 'package.json');
    let manifest: Manifest | undefined;
    try {
      manifest = JSON.parse(readFileSync(candidate, 'utf8')) as Manifest;
    } catch {
      // none here (or unreadable): look further up
    }
    if (manifest && (name === undefined || manifest.name === name)) return { dir, manifest };
    const up = path.dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** Where a package name resolves from this module, as the registry's import would; else undefined. */
export function resolvePackageFile(specifier: string): string | undefined {
  try {
    return fileURLToPath(import.meta.resolve(specifier));
  } catch {
    try {
      return createRequire(import.meta.url).resolve(specifier);
    } catch {
      return undefined;
    }
  }
}

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
export function packageNameOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** The version of the tool kit this process serves, from the kit's own package.json. */
export function hostKitVersion(): string {
  const entry = resolvePackageFile(KIT_PACKAGE);
  const found = entry ? manifestOf(entry, KIT_PACKAGE) : undefined;
  if (typeof found?.manifest.version !== 'string') {
    throw new Error(`the version of ${KIT_PACKAGE} could not be read from its package.json`);
  }
  return found.manifest.version;
}

/**
 * Refuses a pack whose package.json asks for a tool kit this process does not serve, naming
 * both versions. The range is the pack's `peerDependencies`, else `dependencies`, else
 * `devDependencies` entry for the kit; a `file:`/`link:` dependency is the linked kit's own
 * version (its breaking line must be the host's). A pack without one (a bare module) or with
 * a range that is not semver (a git URL, a tag) loads, with a warning.
 */
export function checkKitCompatibility(
  pack: { spec: string; file: string | undefined; packageName?: string },
  host: string,
  warn: (message: string) => void,
): void {
  const found = pack.file ? manifestOf(pack.file, pack.packageName) : undefined;
  const m = found?.manifest;
  const declared = [m?.peerDependencies, m?.dependencies, m?.devDependencies]
    .map((d) => d?.[KIT_PACKAGE])
    .find((r) => r !== undefined);
  // Named as its package when its package.json is the one that speaks for it.
  const label = typeof declared === 'string' && typeof m?.name === 'string' ? m.name : pack.spec;
  if (typeof declared !== 'string') {
    warn(
      `pack ${label} declares no ${KIT_PACKAGE} range (no package.json dependency on it): it is loaded without a compatibility check`,
    );
    return;
  }
  const hostLine = breakingLine(host) ?? host;
  let range = declared.trim().replace(/^workspace:/, '');
  if (/^(file|link):/.test(range)) {
    const linked = manifestOf(
      path.join(path.resolve(found!.dir, range.replace(/^(file|link):/, '')), 'package.json'),
    )?.manifest.version;
    if (typeof linked !== 'string') {
      warn(`pack ${label}: its ${KIT_PACKAGE} dependency ${declared} has no readable version`);
      return;
    }
    if (breakingLine(linked) === hostLine) return;
    refuse(label, `${linked} (${declared})`, host, hostLine);
  }
  if (range === '' || range === '^' || range === '~') range = '*';
  const admits = rangeAdmits(range, host);
  if (admits === undefined) {
    warn(
      `pack ${label}: its ${KIT_PACKAGE} range ${JSON.stringify(declared)} is not a semver range: it is loaded without a compatibility check`,
    );
    return;
  }
  if (!admits) refuse(label, declared, host, hostLine);
}

function refuse(label: string, needs: string, host: string, hostLine: string): never {
  throw new RegistryError(
    'kit_incompatible',
    `pack ${label} needs ${KIT_PACKAGE} ${needs}; this gateway serves ${hostLine} (${host})`,
  );
}
