import pg from 'pg';

/**
 * The text of every statement this process sends to PostgreSQL while `during` runs, whichever
 * pool or client sends it (each pg `Query` submitted to its connection): for tests that count
 * round trips. Only this process's: an in-process stack's gateway and workers, not a child's.
 */
export async function submittedStatements(during: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const Query = pg.Query as unknown as { prototype: { submit: (...a: unknown[]) => unknown } };
  const submit = Query.prototype.submit;
  Query.prototype.submit = function (this: { text?: string }, ...args: unknown[]) {
    seen.push(this.text ?? '');
    return submit.apply(this, args);
  };
  try {
    await during();
  } finally {
    Query.prototype.submit = submit;
  }
  return seen;
}
