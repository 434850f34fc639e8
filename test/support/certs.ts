import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { frame2026 } from '../../scripts/lib/mcp-2026-frame.ts';

const run = promisify(execFile);

/** A certificate and its key, as PEM text and as files (for GATEWAY_TLS_* variables). */
export interface Issued {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
}

export interface TestPki {
  dir: string;
  /** The CA the gateway trusts for client certificates (and that issued its server certificate). */
  ca: Issued;
  /** Server certificate for 127.0.0.1 / localhost. */
  server: Issued;
  /** A client certificate issued by `ca`; `uris` become URI SANs, `issuer` defaults to `ca`. */
  client(
    name: string,
    options?: { uris?: string[]; issuer?: Issued; days?: number },
  ): Promise<Issued>;
  /** Another CA, trusted by nobody. */
  rogueCa(): Promise<Issued>;
  close(): Promise<void>;
}

/**
 * Makes a throwaway PKI with the openssl CLI in a temp directory: nothing is committed, keys
 * live only as long as the test. EC P-256 keys, one-day certificates.
 */
export async function createTestPki(): Promise<TestPki> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-pki-'));
  const file = (name: string) => path.join(dir, name);
  let serial = 1;

  const newCa = async (name: string): Promise<Issued> => {
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.pem`),
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    return read(name);
  };

  const issue = async (
    name: string,
    issuer: Issued,
    extensions: string[],
    days = 1,
  ): Promise<Issued> => {
    await run('openssl', [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.csr`),
      '-subj',
      `/CN=${name}`,
    ]);
    await writeFile(
      file(`${name}.ext`),
      ['basicConstraints=critical,CA:FALSE', ...extensions].join('\n') + '\n',
    );
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      issuer.certFile,
      '-CAkey',
      issuer.keyFile,
      '-set_serial',
      String(serial++),
      '-days',
      String(days),
      '-out',
      file(`${name}.pem`),
      '-extfile',
      file(`${name}.ext`),
    ]);
    return read(name);
  };

  const read = async (name: string): Promise<Issued> => ({
    cert: await readFile(file(`${name}.pem`), 'utf8'),
    key: await readFile(file(`${name}.key`), 'utf8'),
    certFile: file(`${name}.pem`),
    keyFile: file(`${name}.key`),
  });

  const ca = await newCa('test-ca');
  const server = await issue('server', ca, [
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
    'extendedKeyUsage=serverAuth',
  ]);
  let rogue = 0;
  return {
    dir,
    ca,
    server,
    client: (name, options = {}) =>
      issue(
        name,
        options.issuer ?? ca,
        [
          ...(options.uris?.length
            ? [`subjectAltName=${options.uris.map((u) => `URI:${u}`).join(',')}`]
            : []),
          'extendedKeyUsage=clientAuth',
        ],
        options.days,
      ),
    rogueCa: () => newCa(`rogue-ca-${++rogue}`),
    close: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The forwarded-certificate header value a proxy sends (URL-encoded PEM, as nginx does). */
export const forwardedCert = (issued: Issued) => encodeURIComponent(issued.cert);

/**
 * One 2026-07-28 JSON-RPC request over http(s) with node's own client, which (unlike fetch)
 * can present a client certificate and choose the local address the gateway sees as peer.
 */
export async function mcpRequest(
  url: string,
  token: string,
  method: string,
  params: Record<string, unknown>,
  options: {
    ca?: string;
    client?: Pick<Issued, 'cert' | 'key'>;
    localAddress?: string;
    /** An array value sends the header once per element. */
    headers?: Record<string, string | string[]>;
    tasksExtension?: boolean;
  } = {},
): Promise<{ status: number; body: any }> {
  const { headers, body } = frame2026(token, method, params, {
    id: 1,
    clientName: 'certs-test',
    ...(options.tasksExtension ? { tasksExtension: true } : {}),
  });
  const target = new URL(url);
  const requestOptions: https.RequestOptions = {
    method: 'POST',
    hostname: target.hostname,
    port: target.port,
    path: target.pathname,
    headers: { ...headers, ...options.headers },
    ...(options.localAddress ? { localAddress: options.localAddress } : {}),
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.client ? { cert: options.client.cert, key: options.client.key } : {}),
    agent: false,
  };
  const send = target.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(requestOptions, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // SSE or empty: keep the text
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
