#!/usr/bin/env node
// mcp-task-gateway: the one launcher of the product (docs/packaging.md). `npm start` and the
// repository's npm scripts are thin calls of it.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { findCommand, usage } from './commands.ts';

const version = (
  JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as {
    version: string;
  }
).version;

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v') {
    process.stdout.write(`${version}\n`);
    return;
  }
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(usage(version));
    return;
  }
  let found;
  try {
    found = findCommand(name, rest);
  } catch (error) {
    if (!missingDevPackage(error)) throw error;
    return devPackagesMissing(argv, error);
  }
  if (!found) {
    process.stderr.write(
      `mcp-task-gateway: unknown command "${argv.join(' ')}"\n\n${usage(version)}`,
    );
    process.exitCode = 2;
    return;
  }
  // Each command is an entry module that reads process.argv and exits with its own code:
  // it sees the arguments after its name, as it would run on its own.
  process.argv = [process.argv[0]!, found.module, ...found.args];
  try {
    await import(found.module);
  } catch (error) {
    if (!missingDevPackage(error)) throw error;
    devPackagesMissing(argv, error);
  }
}

/** The development-only packages are optional dependencies: a production install omits them. */
const DEV_PACKAGES = ['@mtg/dev-postgres', '@mtg/app-idp', '@mtg/demo-tools'];

function missingDevPackage(error: unknown): error is Error {
  return (
    (error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' &&
    DEV_PACKAGES.some((p) => (error as Error).message.includes(p))
  );
}

function devPackagesMissing(argv: string[], error: Error): void {
  process.stderr.write(
    `mcp-task-gateway ${argv[0]}: this install has no development packages ` +
      `(${DEV_PACKAGES.join(', ')}; optional dependencies of @mtg/cli, which a production ` +
      `install omits): install them with \`npm install --include=optional @mtg/cli\`\n  (${error.message.split('\n')[0]})\n`,
  );
  process.exitCode = 2;
}

await main(process.argv.slice(2));
