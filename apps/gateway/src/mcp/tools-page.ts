/**
 * tools/list in pages (MCP pagination: an opaque `cursor` in, `nextCursor` out), the same on
 * every wire. The list is ordered by name and a cursor is the last name of its page, so a page
 * asked of another replica, or after the catalogue changed, goes on where the last one ended:
 * a tool added or removed meanwhile is listed or not, but no other tool is skipped or repeated.
 */

/** Tools per tools/list page (docs/upstreams.md, "Names, limits and pages"). */
export const TOOLS_PAGE_SIZE = 100;

const CURSOR_VERSION = 1;

export type ToolsPage<T> =
  | { ok: true; tools: T[]; nextCursor?: string }
  | { ok: false; code: 'invalid_cursor'; message: string };

export function pageOfTools<T extends { name: string }>(
  tools: readonly T[],
  cursor: string | undefined,
  size = TOOLS_PAGE_SIZE,
): ToolsPage<T> {
  let after: string | undefined;
  if (cursor !== undefined) {
    after = decodeCursor(cursor);
    if (after === undefined) {
      return {
        ok: false,
        code: 'invalid_cursor',
        message: 'Invalid params: cursor: pass a nextCursor this server returned',
      };
    }
  }
  const sorted = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const rest = after === undefined ? sorted : sorted.filter((t) => t.name > after);
  const page = rest.slice(0, size);
  return {
    ok: true,
    tools: page,
    ...(rest.length > size ? { nextCursor: encodeCursor(page[page.length - 1]!.name) } : {}),
  };
}

function encodeCursor(after: string): string {
  return Buffer.from(JSON.stringify({ v: CURSOR_VERSION, after })).toString('base64url');
}

/** The name a cursor this server wrote resumes after, or undefined for anything else. */
function decodeCursor(cursor: string): string | undefined {
  if (cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const c = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown;
    if (typeof c !== 'object' || c === null) return undefined;
    const { v, after } = c as { v?: unknown; after?: unknown };
    if (v !== CURSOR_VERSION || typeof after !== 'string' || after.length === 0) return undefined;
    if (encodeCursor(after) !== cursor) return undefined; // only the exact form written here
    return after;
  } catch {
    return undefined;
  }
}
