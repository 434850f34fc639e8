// How fast this machine runs at the moment: a fixed workload's CPU time, taken at a run's start
// and end and printed in the report's header. On a shared virtual machine the same code can
// measure half again as much CPU per task from one hour (or host) to the next; these two
// figures let a reader compare runs by the machine they ran on, not only by the code.
import { createHash } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { runJsonScript } from './child-json.ts';

export interface MachineSpeed {
  /** CPU ms of a fixed in-process workload: integer arithmetic, SHA-256, JSON. */
  computeMs: number;
  /** CPU µs per loopback TCP round trip, both ends in this process (the kernel's share too). */
  roundTripUs: number;
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

function compute(): number {
  let x = 0;
  for (let i = 0; i < 3e7; i++) x = (x * 31 + i) | 0;
  for (let i = 0; i < 20_000; i++) createHash('sha256').update(`abc${i}`).digest();
  const doc = { a: [1, 2, 3, { b: 'x'.repeat(200) }], i: 0 };
  for (let i = 0; i < 3000; i++) JSON.parse(JSON.stringify({ ...doc, i }));
  return x;
}

async function roundTrips(n: number): Promise<void> {
  const server = net.createServer((s) => s.on('data', (d) => s.write(d)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  for (let i = 0; i < n; i++)
    await new Promise<void>((resolve) => {
      socket.once('data', () => resolve());
      socket.write('ping');
    });
  socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * Measured in a fresh process each time, so the JIT state of a long run cannot move it: the
 * median of three measurements of each, after a warm-up.
 */
export function machineSpeed(): Promise<MachineSpeed> {
  return runJsonScript<MachineSpeed>(fileURLToPath(import.meta.url), ['--measure']);
}

async function measure(): Promise<MachineSpeed> {
  compute();
  await roundTrips(1000);
  const computeRuns: number[] = [];
  const tripRuns: number[] = [];
  for (let r = 0; r < 3; r++) {
    let c0 = cpuMs();
    compute();
    computeRuns.push(cpuMs() - c0);
    c0 = cpuMs();
    await roundTrips(5000);
    tripRuns.push(((cpuMs() - c0) * 1000) / 5000);
  }
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!;
  return { computeMs: mid(computeRuns), roundTripUs: mid(tripRuns) };
}

if (process.argv[2] === '--measure') console.log(JSON.stringify(await measure()));
