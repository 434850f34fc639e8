// serveUntilSignalled on a real process: SIGTERM lets the request in flight finish, refuses
// new connections, closes an idle keep-alive connection, runs onClose and exits 0; a request
// that outlives the drain bound is cut and the process still exits.
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('./support/slow-server.ts', import.meta.url));

interface Started {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  exited: Promise<number | null>;
}

async function start(env: Record<string, string> = {}): Promise<Started> {
  const child = fork(SERVER, [], {
    execArgv: [],
    env: { ...process.env, LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`exited ${code} before ready`)));
  });
  return { child, url, stdout: () => out, exited };
}

function get(url: string, agent: http.Agent | false) {
  return new Promise<{ status: number; body: string; connection: string | undefined }>(
    (resolve, reject) => {
      http
        .get(url, { agent }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c) => (body += c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }),
          );
        })
        .on('error', reject);
    },
  );
}

test('SIGTERM: the request in flight completes, new connections are refused, onClose runs, exit 0', async () => {
  const s = await start();
  const keepAlive = new http.Agent({ keepAlive: true });
  try {
    expect((await get(`${s.url}/`, keepAlive)).body).toBe('fast');
    const closedIdle = new Promise<void>((resolve) => {
      for (const sockets of Object.values(keepAlive.freeSockets))
        for (const socket of sockets ?? []) socket.once('close', () => resolve());
    });
    const slow = get(`${s.url}/slow`, false);
    await new Promise((r) => setTimeout(r, 200));
    s.child.kill('SIGTERM');
    // The idle keep-alive connection is closed by the server, not left to time out.
    await closedIdle;
    await new Promise((r) => setTimeout(r, 100));
    await expect(get(`${s.url}/`, false)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(await slow).toMatchObject({ status: 200, body: 'slow done' });
    expect(await s.exited).toBe(0);
    expect(s.stdout()).toContain('onClose ran');
  } finally {
    keepAlive.destroy();
    s.child.kill('SIGKILL');
  }
});

test('a request that outlives the drain bound is cut, and the process still exits 0', async () => {
  const s = await start({ SLOW_MS: '60000', DRAIN_MS: '300' });
  try {
    const slow = get(`${s.url}/slow`, false);
    await new Promise((r) => setTimeout(r, 200));
    const signalled = Date.now();
    s.child.kill('SIGTERM');
    await expect(slow).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(await s.exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(5_000);
    expect(s.stdout()).toContain('onClose ran');
  } finally {
    s.child.kill('SIGKILL');
  }
});
