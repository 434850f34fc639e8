// `mcp-task-gateway init <directory> [--name <package-name>]`: writes a new tool pack from
// the template shipped with the CLI (templates/pack): an instant tool, a long tool over one
// target, a TARGETS_FILE example, a harness test that passes, and a README.
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CliError } from '../audit/database.ts';
import { runCli } from '../lib/run-cli.ts';

const USAGE = `usage: mcp-task-gateway init <directory> [--name <package-name>]

Writes a new tool pack in <directory> (which must not exist or be empty), then:
  cd <directory> && npm install && npm test && npx mcp-task-gateway dev`;

const TEMPLATE = fileURLToPath(new URL('../../templates/pack', import.meta.url));
const PACKAGE_NAME = /^(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/;

async function readVersions(): Promise<{ kit: string; zod: string }> {
  const cli = JSON.parse(
    await readFile(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8'),
  ) as { version: string };
  const kitManifest = fileURLToPath(
    new URL('../package.json', import.meta.resolve('@mtg/tool-kit')),
  );
  const kit = JSON.parse(await readFile(kitManifest, 'utf8')) as {
    peerDependencies?: Record<string, string>;
  };
  return { kit: cli.version, zod: kit.peerDependencies?.zod ?? '^4' };
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' } },
  });
  const [directory] = positionals;
  if (!directory || positionals.length > 1) throw new CliError('name one directory');
  const target = path.resolve(directory);
  const name = values.name ?? path.basename(target);
  if (existsSync(target) && (await readdir(target)).length > 0) {
    throw new CliError(`${directory} exists and is not empty`);
  }
  if (!PACKAGE_NAME.test(name)) {
    throw new CliError(`"${name}" is not a valid npm package name: pass --name <package-name>`);
  }
  const versions = await readVersions();
  await mkdir(target, { recursive: true });
  await cp(TEMPLATE, target, { recursive: true });
  // npm leaves .gitignore files out of packages, so the template ships it without the dot.
  await rename(path.join(target, 'gitignore'), path.join(target, '.gitignore'));
  const substitute = async (file: string) => {
    const text = await readFile(file, 'utf8');
    await writeFile(
      file,
      text
        .replaceAll('__NAME__', name)
        .replaceAll('__KIT_VERSION__', versions.kit)
        .replaceAll('__ZOD_RANGE__', versions.zod),
    );
  };
  for (const file of ['package.json', 'README.md', 'src/index.ts']) {
    await substitute(path.join(target, file));
  }
  process.stdout.write(
    `wrote the pack ${name} in ${directory}\n\n  cd ${directory}\n  npm install\n  npm test\n  npx mcp-task-gateway dev\n`,
  );
  return 0;
}

runCli('init', USAGE, () => main(process.argv.slice(2)), { usageOnCliError: true });
