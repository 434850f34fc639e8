import http from 'node:http';

/** One hostile request: exact bytes and headers, as node:http sends them (fetch would refuse some). */
export interface RawRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface RawReply {
  status: number;
  body: string;
  ms: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

export function destroyAgent(): void {
  agent.destroy();
}

/**
 * Sends a request and reads the whole reply. A connection the server closed instead of
 * answering resolves with status 0 (so the caller can tell it from a 5xx); no reply within
 * timeoutMs rejects.
 */
export function sendRaw(baseUrl: string, r: RawRequest, timeoutMs = 15_000): Promise<RawReply> {
  const url = new URL(r.path ?? '/mcp', baseUrl);
  const body =
    r.body === undefined
      ? undefined
      : Buffer.isBuffer(r.body)
        ? r.body
        : Buffer.from(r.body, 'utf8');
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        agent,
        method: r.method ?? 'POST',
        headers: { ...(body ? { 'content-length': String(body.length) } : {}), ...r.headers },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            ms: performance.now() - started,
          }),
        );
        res.on('error', () =>
          resolve({ status: res.statusCode ?? 0, body: '', ms: performance.now() - started }),
        );
      },
    );
    request.on('timeout', () => {
      request.destroy();
      reject(new Error(`no reply within ${timeoutMs} ms`));
    });
    // The server may answer (413) and close before reading an oversized body.
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE')
        resolve({ status: 0, body: error.code, ms: performance.now() - started });
      else reject(error);
    });
    if (body) request.write(body);
    request.end();
  });
}
