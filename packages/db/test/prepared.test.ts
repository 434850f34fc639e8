import { prepared, queryMaybePrepared } from '../src/index.ts';

test('a prepared statement is named by its text and refuses a * result', () => {
  const a = prepared('SELECT revoked FROM app.principals WHERE tenant = $1');
  expect(a.name).toMatch(/^mtg_[0-9a-f]{24}$/);
  expect(prepared(a.text).name).toBe(a.name);
  expect(prepared('SELECT 1 WHERE $1').name).not.toBe(a.name);
  expect(() => prepared('SELECT * FROM app.tasks WHERE id = $1')).toThrow(/list the columns/);
  expect(() => prepared('UPDATE app.tasks SET status = $1 RETURNING *')).toThrow(
    /list the columns/,
  );
  expect(() => prepared('SELECT count(*) FROM app.tasks WHERE id = $1')).not.toThrow();
});

test('library SQL runs prepared only when it has parameters and no * result', async () => {
  const seen: unknown[] = [];
  const db = {
    query: async (q: unknown, values?: unknown[]) => {
      seen.push(values === undefined ? q : { text: q, values });
      return { rows: [] } as never;
    },
  };
  await queryMaybePrepared(db, 'SELECT 1; SELECT 2');
  await queryMaybePrepared(db, 'SELECT * FROM x WHERE a = $1', [1]);
  await queryMaybePrepared(db, 'SELECT a FROM x WHERE a = $1', [1]);
  const recordset =
    'INSERT INTO j (id) SELECT id FROM (SELECT *, 1 AS n FROM json_to_recordset($1::json) AS x (id uuid)) s';
  await queryMaybePrepared(db, recordset, ['[]']);
  const hidden =
    'SELECT * FROM job WHERE id IN (SELECT id FROM json_to_recordset($1::json) AS x (id uuid))';
  await queryMaybePrepared(db, hidden, ['[]']);
  expect(seen[0]).toBe('SELECT 1; SELECT 2');
  expect(seen[1]).toEqual({ text: 'SELECT * FROM x WHERE a = $1', values: [1] });
  expect(seen[2]).toMatchObject({ name: expect.stringMatching(/^mtg_/), values: [1] });
  expect(seen[3]).toMatchObject({ name: expect.stringMatching(/^mtg_/), text: recordset });
  expect(seen[4]).toEqual({ text: hidden, values: ['[]'] });
});
