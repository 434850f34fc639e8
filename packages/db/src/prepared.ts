import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from './with-transaction.ts';

/**
 * A statement PostgreSQL parses and plans once per connection instead of on every call (a
 * named prepared statement). For the hot paths: planning a one-row lookup on app.tasks costs
 * PostgreSQL several times what executing it does (measured ~150 µs vs ~40 µs of backend CPU).
 *
 * Rules: a fixed text (each connection keeps every statement it prepared), and no `SELECT *`
 * or `RETURNING *` — a prepared `*` fails with "cached plan must not change result type"
 * once a migration adds a column, until the connection closes. List the columns instead (a
 * `*` over the column list a json_to_recordset names, as in pg-boss's inserts, is fixed).
 * Behind PgBouncer in transaction mode this needs its `max_prepared_statements`.
 */
export interface PreparedStatement {
  readonly name: string;
  readonly text: string;
}

const STAR = /\b(select|returning)\s+\*/i;
// `SELECT * FROM json_to_recordset($n) AS x (col type, ...)` (pg-boss's batch statements)
// expands a column list written in the statement itself: no migration can change it.
const LITERAL_RECORDSET_STAR =
  /\bselect\s+\*(?:(?!\bfrom\b)[\s\S])*?\bfrom\s+json_to_recordset\b/gi;
const selectsTableStar = (text: string) => STAR.test(text.replace(LITERAL_RECORDSET_STAR, ''));

export function prepared(text: string): PreparedStatement {
  if (selectsTableStar(text)) throw new Error(`prepared(): list the columns instead of *: ${text}`);
  return { name: nameOf(text), text };
}

const nameOf = (text: string) =>
  `mtg_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;

/** Runs a prepared statement on a pool or a client (inside its transaction, if any). */
export function runPrepared<R extends pg.QueryResultRow = pg.QueryResultRow>(
  db: Queryable,
  statement: PreparedStatement,
  values: unknown[],
): Promise<pg.QueryResult<R>> {
  return (db as unknown as pg.ClientBase).query<R>({
    name: statement.name,
    text: statement.text,
    values,
  });
}

/**
 * For a library's SQL (pg-boss) passed through our pool: its parameterized statements are a
 * small fixed set, so each runs prepared, except any with a `*` over a table (see above; a
 * `*` over a json_to_recordset column list is fine) and any without parameters (which may
 * hold several commands).
 */
export function queryMaybePrepared(
  db: Queryable,
  text: string,
  values?: unknown[],
): Promise<pg.QueryResult> {
  const statement = values && values.length > 0 ? namedFor(text) : undefined;
  return statement ? runPrepared(db, statement, values!) : db.query(text, values);
}

// The texts seen so far. Past MAX_NAMED distinct texts the set is evidently not fixed, so new
// ones run unprepared rather than pile up in every connection.
const MAX_NAMED = 200;
const names = new Map<string, PreparedStatement>();
function namedFor(text: string): PreparedStatement | undefined {
  let s = names.get(text);
  if (!s && names.size < MAX_NAMED && !selectsTableStar(text))
    names.set(text, (s = { name: nameOf(text), text }));
  return s;
}
