import { ConfigError } from '@mtg/config';
import { CliError } from '../audit/database.ts';
import { exitWhenWritten } from './exit-when-written.ts';

/**
 * Runs an operator command's `main` and exits with its code. A CliError exits with its own
 * code (2 usage/configuration, 3 could not run), a configuration or argument error with 2 and
 * the usage, anything else with 3 and its stack. `usageOnCliError`: also print the usage
 * after a CliError of code 2.
 */
export function runCli(
  name: string,
  usage: string,
  main: () => Promise<number>,
  options: { usageOnCliError?: boolean } = {},
): void {
  main().then(
    (code) => exitWhenWritten(code),
    (error: unknown) => {
      if (error instanceof CliError) {
        const withUsage = options.usageOnCliError && error.exitCode === 2 ? `${usage}\n` : '';
        process.stderr.write(`${name}: ${error.message}\n${withUsage}`);
        exitWhenWritten(error.exitCode);
        return;
      }
      if (
        error instanceof ConfigError ||
        String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS')
      ) {
        process.stderr.write(`${name}: ${(error as Error).message}\n${usage}\n`);
        exitWhenWritten(2);
        return;
      }
      process.stderr.write(`${name}: ${error instanceof Error ? error.stack : String(error)}\n`);
      exitWhenWritten(3);
    },
  );
}
