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
  const found = findCommand(name, rest);
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
  await import(found.module);
}

await main(process.argv.slice(2));
