import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/**
 * A package registry for one npm scope on loopback, serving the tarballs `npm run pack` made,
 * so a test installs them with a plain `npm install` as a team would from its registry
 * (`@mtg:registry=<url>` in its npm config). Every other package comes from the usual
 * registry. A test stand-in for a registry: only the two reads npm makes (a package's
 * document, a tarball).
 */
export interface ScopeRegistry {
  url: string;
  close(): Promise<void>;
}

export async function startScopeRegistry(tarballDir: string): Promise<ScopeRegistry> {
  const tarballs = new Map<string, Buffer>();
  const documents = new Map<string, (base: string) => unknown>();
  for (const file of readdirSync(tarballDir).filter((f) => f.endsWith('.tgz'))) {
    const data = readFileSync(path.join(tarballDir, file));
    const manifest = JSON.parse(
      execFileSync('tar', ['-xzOf', path.join(tarballDir, file), 'package/package.json'], {
        encoding: 'utf8',
      }),
    ) as { name: string; version: string };
    tarballs.set(file, data);
    const dist = (base: string) => ({
      tarball: `${base}/-/${file}`,
      shasum: createHash('sha1').update(data).digest('hex'),
      integrity: `sha512-${createHash('sha512').update(data).digest('base64')}`,
    });
    documents.set(manifest.name, (base) => ({
      name: manifest.name,
      'dist-tags': { latest: manifest.version },
      versions: {
        [manifest.version]: {
          ...manifest,
          _id: `${manifest.name}@${manifest.version}`,
          dist: dist(base),
        },
      },
    }));
  }
  const server: Server = createServer((req, res) => {
    const base = `http://${req.headers.host}`;
    const url = decodeURIComponent((req.url ?? '/').split('?')[0]!);
    const tarball = url.startsWith('/-/') ? tarballs.get(url.slice(3)) : undefined;
    if (tarball) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tarball);
      return;
    }
    const document = documents.get(url.slice(1));
    if (document) {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(document(base)));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
