// A loopback port for a server that will listen on it later. The port is chosen outside the
// kernel's ephemeral range: a port taken from that range (listen(0), then close) can be
// handed to any outgoing connection in between (every PostgreSQL connection a test opens takes
// one), and the later listen then fails with EADDRINUSE. Outside the range only a listener can
// take it, and the port is checked free before it is given out.
import { readFileSync } from 'node:fs';
import net from 'node:net';

const LOWEST = 10_000;
const HIGHEST = 65_535;
/** Ports this process has handed out: never handed out twice. */
const given = new Set<number>();

/** The kernel's ephemeral range (where connections' local ports come from). */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low!, high!];
  } catch {
    // not Linux: the IANA dynamic range, which most other systems use
  }
  return [49_152, 65_535];
}

function canListen(port: number): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () =>
      server.close(() => resolve(true)),
    );
  });
}

export async function freePort(): Promise<number> {
  const [low, high] = ephemeralRange();
  const below = Math.max(0, low - LOWEST);
  const above = Math.max(0, HIGHEST - high);
  for (let tries = 0; tries < 1_000 && below + above > 0; tries++) {
    const n = Math.floor(Math.random() * (below + above));
    const port = n < below ? LOWEST + n : high + 1 + (n - below);
    if (given.has(port) || !(await canListen(port))) continue;
    given.add(port);
    return port;
  }
  throw new Error(`no free loopback port outside the ephemeral range ${low}-${high}`);
}
