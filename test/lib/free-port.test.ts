import { readFileSync } from 'node:fs';
import net from 'node:net';
import { freePort } from '../support/free-port.ts';

// A port from the ephemeral range can be taken by any outgoing connection between the choice
// and the listen (a CI run failed so: EADDRINUSE on a stack's own port).
test('a free port lies outside the ephemeral range, is never given twice, and can be listened on', async () => {
  const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  const ports = await Promise.all(Array.from({ length: 50 }, () => freePort()));
  for (const port of ports) {
    expect(port < low! || port > high!).toBe(true);
    expect(port).toBeGreaterThanOrEqual(10_000);
  }
  expect(new Set(ports).size).toBe(ports.length);
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(ports[0], '127.0.0.1', () => resolve());
  });
  await new Promise((r) => server.close(r));
});
