/**
 * Just enough of the PostgreSQL wire protocol (v3) for the TCP relay to know what a client
 * is committing: the frontend messages it sends (a simple query, the Parse and Bind of a
 * prepared statement, Sync) and the transaction status the backend reports in each
 * ReadyForQuery. Chunks are split into messages however TCP cut them.
 */
export type Frontend =
  | { type: 'query'; text: string }
  | { type: 'parse'; name: string; text: string }
  | { type: 'bind'; statement: string }
  | { type: 'sync' }
  | { type: 'other' };

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

const cstring = (b: Buffer, at: number): [string, number] => {
  const end = b.indexOf(0, at);
  return [b.toString('utf8', at, end), end + 1];
};

/** Splits a client's byte stream into messages (the startup message has no type byte). */
export function frontendReader(): (chunk: Buffer) => Frontend[] {
  let buf = Buffer.alloc(0);
  let untyped = true;
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    const out: Frontend[] = [];
    for (;;) {
      if (untyped) {
        if (buf.length < 8) break;
        const len = buf.readInt32BE(0);
        if (buf.length < len) break;
        const code = buf.readInt32BE(4);
        // An SSL or GSS request is followed by a second untyped (startup) message.
        untyped = code === SSL_REQUEST || code === GSSENC_REQUEST;
        buf = buf.subarray(len);
        out.push({ type: 'other' });
        continue;
      }
      if (buf.length < 5) break;
      const len = buf.readInt32BE(1);
      if (buf.length < 1 + len) break;
      const type = String.fromCharCode(buf[0]!);
      const body = buf.subarray(5, 1 + len);
      buf = buf.subarray(1 + len);
      if (type === 'Q') out.push({ type: 'query', text: cstring(body, 0)[0] });
      else if (type === 'P') {
        const [name, next] = cstring(body, 0);
        out.push({ type: 'parse', name, text: cstring(body, next)[0] });
      } else if (type === 'B') {
        const [, next] = cstring(body, 0); // the portal
        out.push({ type: 'bind', statement: cstring(body, next)[0] });
      } else if (type === 'S') out.push({ type: 'sync' });
      else out.push({ type: 'other' });
    }
    return out;
  };
}

/**
 * Follows a server's byte stream; returns the transaction status of the last ReadyForQuery
 * in what has arrived so far ('I' idle, 'T' in a transaction, 'E' in a failed one), or
 * undefined when there was none.
 */
export function readyStatusReader(): (chunk: Buffer) => string | undefined {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    let status: string | undefined;
    for (;;) {
      // The one-byte answer to an SSL request ('N' or 'S') is the only untyped message; the
      // relay's clients do not ask for SSL, so every message here is typed.
      if (buf.length < 5) break;
      const len = buf.readInt32BE(1);
      if (buf.length < 1 + len) break;
      if (buf[0] === 0x5a) status = String.fromCharCode(buf[5]!);
      buf = buf.subarray(1 + len);
    }
    return status;
  };
}
