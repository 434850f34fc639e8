// Every CSV writer (the console's exports, the audit CLI's rows) guards against formulas the
// same way: OWASP's list (=, +, -, @, tab, carriage return), also behind leading whitespace of
// any kind (space, newline, tab, no-break space, zero-width), which spreadsheets skip.
import express from 'express';
import type { AddressInfo } from 'node:net';
import { toCsv } from '@mtg/audit';
import { sendExport } from '../../apps/console/src/http/export.ts';
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

/** One value as the shared writer puts it in a one-column CSV's data row. */
function field(value: string): string {
  const csv = toCsv(['c'], [{ c: value }]);
  return csv.slice(csv.indexOf('\r\n') + 2, -2);
}

/** The cells of one data row of a two-line CSV (header, row) whose cells hold no comma. */
function dataCell(csv: string): string {
  const body = csv.slice(csv.indexOf('\r\n') + 2, -2);
  return unquote(body);
}

test(`the CSV writer prefixes every one of ${dangerous.length} formula variants with a quote`, () => {
  const missed = dangerous.filter((v) => !unquote(field(v)).startsWith("'"));
  expect(missed).toEqual([]);
  // The prefix is the only change: the cell reads back as the value after the quote.
  for (const v of dangerous) expect(unquote(field(v))).toBe(`'${v}`);
});

test('a lone leading tab, carriage return or newline is prefixed too (OWASP)', () => {
  for (const v of ['\tx', '\rx', '\nx']) expect(unquote(field(v))).toBe(`'${v}`);
});

test('ordinary cells are left alone, and quoting stays RFC 4180', () => {
  for (const v of ['acme', 'a-b', 'x=1', '2026-12-01T00:00:00.000Z', 'user@example', ' text', '']) {
    expect(unquote(field(v))).toBe(v);
  }
  expect(field('a,b')).toBe('"a,b"');
  expect(field('say "hi"')).toBe('"say ""hi"""');
  expect(field('=a,"b"')).toBe(`"'=a,""b"""`);
});

test('a header row, CRLF line ends, timestamps in ISO 8601 and objects as JSON', () => {
  const at = new Date('2026-12-01T10:00:00Z');
  expect(toCsv(['at', 'detail', 'none'], [{ at, detail: { a: 1 }, none: null }])).toBe(
    'at,detail,none\r\n2026-12-01T10:00:00.000Z,"{""a"":1}",\r\n',
  );
});

test("the console's exports and the audit CLI's CSV both apply the guard", async () => {
  const cells = dangerous.filter((v) => !v.includes(','));
  const cli = cells.filter((v) => !dataCell(formatRows('csv', ['c'], [{ c: v }])).startsWith("'"));
  expect(cli).toEqual([]);
  // The console's download, through a real HTTP answer.
  const app = express();
  app.get('/export', (_req, res) => {
    sendExport(
      res,
      'csv',
      'cells',
      ['c'],
      cells.map((c) => ({ c })),
    );
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/export`);
    expect(res.headers.get('content-type')).toContain('text/csv');
    const body = await res.text();
    expect(body).toBe(
      toCsv(
        ['c'],
        cells.map((c) => ({ c })),
      ),
    );
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
