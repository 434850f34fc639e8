// Every CSV writer (the console's exports, the audit CLI's rows) guards against formulas the
// same way: OWASP's list (=, +, -, @, tab, carriage return), also behind leading whitespace of
// any kind (space, newline, tab, no-break space, zero-width), which spreadsheets skip.
import { csvField } from '@mtg/audit';
import { toCsv } from '../../apps/console/src/http/export.ts';
import { formatRows } from '../../apps/cli/src/audit/format-rows.ts';

const TRIGGERS = ['=', '+', '-', '@', '\uff1d', '\uff0b', '\uff0d', '\uff20'];
const LEADS = [
  '',
  ' ',
  '   ',
  '\n',
  '\r\n',
  '\t',
  '\r',
  '\u00a0',
  '\u2007',
  '\u202f',
  '\u3000',
  '\u200b',
  '\ufeff',
  ' \u00a0\n\t',
];
const PAYLOADS = ['1+1', 'HYPERLINK("https://evil.example","x")', "cmd|' /C calc'!A0", ''];

const dangerous = LEADS.flatMap((lead) =>
  TRIGGERS.flatMap((t) => PAYLOADS.map((p) => `${lead}${t}${p}`)),
);

/** The cell as a spreadsheet reads it back: RFC 4180 unquoted. */
function unquote(field: string): string {
  return field.startsWith('"') ? field.slice(1, -1).replaceAll('""', '"') : field;
}

/** The cells of one data row of a two-line CSV (header, row) whose cells hold no comma. */
function dataCell(csv: string): string {
  const body = csv.slice(csv.indexOf('\r\n') + 2, -2);
  return unquote(body);
}

test(`csvField prefixes every one of ${dangerous.length} formula variants with a quote`, () => {
  const missed = dangerous.filter((v) => !unquote(csvField(v)).startsWith("'"));
  expect(missed).toEqual([]);
  // The prefix is the only change: the cell reads back as the value after the quote.
  for (const v of dangerous) expect(unquote(csvField(v))).toBe(`'${v}`);
});

test('a lone leading tab, carriage return or newline is prefixed too (OWASP)', () => {
  for (const v of ['\tx', '\rx', '\nx']) expect(unquote(csvField(v))).toBe(`'${v}`);
});

test('ordinary cells are left alone, and quoting stays RFC 4180', () => {
  for (const v of ['acme', 'a-b', 'x=1', '2026-12-01T00:00:00.000Z', 'user@example', ' text', '']) {
    expect(unquote(csvField(v))).toBe(v);
  }
  expect(csvField('a,b')).toBe('"a,b"');
  expect(csvField('say "hi"')).toBe('"say ""hi"""');
  expect(csvField('=a,"b"')).toBe(`"'=a,""b"""`);
});

test("the console's exports and the audit CLI's CSV both apply the guard", () => {
  const cells = dangerous.filter((v) => !v.includes(','));
  const console = cells.filter((v) => !dataCell(toCsv(['c'], [{ c: v }])).startsWith("'"));
  const cli = cells.filter((v) => !dataCell(formatRows('csv', ['c'], [{ c: v }])).startsWith("'"));
  expect(console).toEqual([]);
  expect(cli).toEqual([]);
});
