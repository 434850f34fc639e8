/**
 * Exits with `code` once stdout and stderr have taken everything written to them. Into a pipe
 * whose reader has not drained it, a write is queued, and `process.exit()` drops that queue:
 * the tail of a long output (a dry run's SQL, a status listing) piped to `less` or a file
 * would be lost.
 */
export function exitWhenWritten(code: number): void {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
}
