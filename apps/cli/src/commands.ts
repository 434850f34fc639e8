import { fileURLToPath } from 'node:url';

/** In this repository the CLI runs from its TypeScript sources; installed, from dist. */
const EXT = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const own = (file: string) => fileURLToPath(new URL(`./commands/${file}${EXT}`, import.meta.url));
const app = (name: string) => fileURLToPath(import.meta.resolve(`@mtg/app-${name}/main`));

interface Command {
  /** How the command is typed (a second word for `audit verify` and the like). */
  words: string[];
  summary: string;
  module: () => string;
}

export const COMMANDS: Command[] = [
  {
    words: ['init'],
    summary: 'write a new tool pack: init <directory>',
    module: () => own('init'),
  },
  {
    words: ['dev'],
    summary: 'the whole embedded stack serving the packs of the current project',
    module: () => own('start'),
  },
  { words: ['gateway'], summary: 'the MCP gateway (production)', module: () => app('gateway') },
  { words: ['worker'], summary: 'a worker process (production)', module: () => app('worker') },
  { words: ['console'], summary: 'the audit and operations console', module: () => app('console') },
  {
    words: ['cell-router'],
    summary: 'the edge router in front of cells',
    module: () => app('cell-router'),
  },
  {
    words: ['idp'],
    summary: 'the development authorization server (never in production)',
    module: () => app('idp'),
  },
  { words: ['downstream'], summary: 'the demo downstream system', module: () => app('downstream') },
  {
    words: ['upstream-demo'],
    summary: 'the demo upstream MCP server',
    module: () => app('upstream-demo'),
  },
  {
    words: ['migrate'],
    summary: 'apply migrations and queues (migrate status, migrate --dry-run)',
    module: () => own('migrate'),
  },
  {
    words: ['wait-for-migrations'],
    summary: 'wait until the database is migrated for this release',
    module: () => own('wait-for-migrations'),
  },
  {
    words: ['audit', 'verify'],
    summary: 'verify the audit chains',
    module: () => own('audit-verify'),
  },
  {
    words: ['audit', 'checkpoint'],
    summary: 'sign checkpoints of the audit chains',
    module: () => own('audit-checkpoint'),
  },
  {
    words: ['audit', 'archive'],
    summary: 'archive closed audit partitions',
    module: () => own('audit-archive'),
  },
  { words: ['audit'], summary: "an auditor's queries (audit --help)", module: () => own('audit') },
  {
    words: ['token'],
    summary: 'print an access token from the running dev IdP',
    module: () => own('token'),
  },
  {
    words: ['user'],
    summary: 'disable|enable a dev IdP user (pushes a revocation)',
    module: () => own('idp-user'),
  },
  {
    words: ['evidence'],
    summary: 'run the evidence checks against a running stack',
    module: () => own('evidence'),
  },
];

/** The command `argv` names (the longest match of its words) and the arguments after them. */
export function findCommand(
  name: string,
  rest: string[],
): { module: string; args: string[] } | undefined {
  const argv = [name, ...rest];
  const matches = COMMANDS.filter((c) => c.words.every((w, i) => argv[i] === w)).sort(
    (a, b) => b.words.length - a.words.length,
  );
  const command = matches[0];
  return command && { module: command.module(), args: argv.slice(command.words.length) };
}

export function usage(version: string): string {
  const rows = COMMANDS.map((c) => `  ${c.words.join(' ').padEnd(22)}${c.summary}`);
  return (
    `mcp-task-gateway ${version}\n\nusage: mcp-task-gateway <command> [options]\n\n` +
    `${rows.join('\n')}\n\nEvery command reads the same environment as the process it runs ` +
    `(docs/operations.md).\n`
  );
}
