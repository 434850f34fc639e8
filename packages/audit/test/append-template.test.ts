// auditAppendTemplate + filledAuditBody: an event whose body the appending statement fills in
// must be stored exactly as the same event written whole in JavaScript (the chain hashes the
// text), whatever the filled values hold.
import pg from 'pg';
import {
  auditAppendArgs,
  auditAppendTemplate,
  filledAuditBody,
  filledBySql,
  type AuditEvent,
} from '../src/index.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const STRINGS = [
  'plain',
  '',
  'quote " and backslash \\ and slash /',
  'controls \b \f \n \r \t \u0001 \u001f \u007f',
  'non-ASCII é ß 漢字, astral 😀, separators \u2028 \u2029',
  '{"looks":"like json"}',
];
const NUMBERS = [0, -5, 42, 1_764_768_000_123];

/** One event with a value filled at the top level, in `data`, nested, and in an array. */
function event(values: { s: string | null; n: number; t: string }): {
  whole: AuditEvent;
  cut: AuditEvent;
} {
  const shape = (s: unknown, n: unknown, t: unknown): AuditEvent => ({
    type: 'task.started',
    taskId: 'task-1',
    tenant: 'acme',
    subject: s as string,
    data: { n, nested: { t, fixed: 'x' }, list: [n, 'y'] },
  });
  return {
    whole: shape(values.s, values.n, values.t),
    cut: shape(filledBySql('s'), filledBySql('n'), filledBySql('t')),
  };
}

async function filled(cut: AuditEvent, values: unknown[]): Promise<string> {
  const [, parts, names] = auditAppendTemplate(cut);
  const r = await pool.query<{ body: string }>(
    `SELECT ${filledAuditBody('$1', '$2', "jsonb_build_object('s', $3::text, 'n', $4::bigint, 't', $5::text)")} AS body`,
    [parts, names, ...values],
  );
  return r.rows[0]!.body;
}

test.each(STRINGS.flatMap((s) => NUMBERS.map((n) => [s, n] as const)))(
  'filled with %j and %j, the body is the event written whole',
  async (s, n) => {
    const { whole, cut } = event({ s, n, t: s });
    expect(await filled(cut, [s, n, s])).toBe(auditAppendArgs(whole)[1]);
  },
);

test('a NULL value is written as JSON null, as in the event written whole', async () => {
  const { whole, cut } = event({ s: null, n: 1, t: 'x' });
  expect(await filled(cut, [null, 1, 'x'])).toBe(auditAppendArgs(whole)[1]);
});

test('appended, the chain stores and hashes exactly that text', async () => {
  const { whole, cut } = event({ s: 'nia "n"', n: 7, t: 'z' });
  const [type, parts, names] = auditAppendTemplate(cut);
  const r = await pool.query<{ seq: string }>(
    `SELECT audit.append($1, ${filledAuditBody('$2', '$3', "jsonb_build_object('s', $4::text, 'n', $5::int, 't', $6::text)")}) AS seq`,
    [type, parts, names, 'nia "n"', 7, 'z'],
  );
  const stored = await pool.query<{ type: string; body: string }>(
    `SELECT type, body FROM audit.events WHERE tenant = 'acme' AND seq = $1`,
    [r.rows[0]!.seq],
  );
  expect(stored.rows).toEqual([{ type: 'task.started', body: auditAppendArgs(whole)[1] }]);
});

test('a value the statement does not give fails the append: nothing half-written', async () => {
  const { cut } = event({ s: 'a', n: 1, t: 'b' });
  const [type, parts, names] = auditAppendTemplate(cut);
  const before = await pool.query(`SELECT count(*)::int AS n FROM audit.events`);
  await expect(
    pool.query(
      `SELECT audit.append($1, ${filledAuditBody('$2', '$3', "jsonb_build_object('s', $4::text, 'n', $5::int)")})`,
      [type, parts, names, 'a', 1],
    ),
  ).rejects.toThrow(/json/i);
  const after = await pool.query(`SELECT count(*)::int AS n FROM audit.events`);
  expect(after.rows[0].n).toBe(before.rows[0].n);
});

test('a filled value outside a template is refused, not written as an object', () => {
  const { cut } = event({ s: 'a', n: 1, t: 'b' });
  expect(() => auditAppendArgs(cut)).toThrow(/filled value outside a template/);
});
