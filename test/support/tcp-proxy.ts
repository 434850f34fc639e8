import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { freePort } from './free-port.ts';
import { frontendReader, readyStatusReader } from './pg-wire.ts';

/**
 * A TCP relay on loopback that can be cut: `down()` closes every relayed connection and
 * refuses new ones (ECONNREFUSED), `up()` listens again on the same port. Stands between a
 * process and PostgreSQL to make the database "go away" without touching the server.
 * `blackhole()` is a network partition instead: connections stay open but nothing passes
 * (new ones are accepted and get no answer), as when packets are dropped; `heal()` lets
 * everything held through again, as TCP retransmission would.
 */
export interface TcpProxy {
  port: number;
  /** `url` with its host and port replaced by the proxy's. */
  via(url: string): string;
  down(): Promise<void>;
  up(): Promise<void>;
  /**
   * `serverDropsAfterMs`: the server side of each held connection is closed after that long,
   * as PostgreSQL does with its tcp_keepalives_* settings when the peer stops answering (its
   * session ends, its locks free); the client side stays open and silent, and is reset at
   * heal(), as a real peer's stale connection would be.
   */
  blackhole(o?: { serverDropsAfterMs?: number }): void;
  heal(): void;
  /**
   * An unknown commit outcome: the next `COMMIT` (a simple-query message, as node-postgres
   * sends it) reaches the server, and the client's connection is cut before the answer
   * comes back; the server's side waits for that answer (so the commit happened) and then
   * closes. Resolves when the cut was made and the server has answered the commit (so what
   * committed can be read).
   */
  cutAtNextCommit(): Promise<void>;
  /**
   * The same cut, at the commit of the next transaction that ran a statement whose text
   * contains `statement`: its `COMMIT` when it ran inside BEGIN … COMMIT, or the statement's
   * own Sync when it ran alone (autocommit: the server commits it there). A prepared
   * statement is recognised by its name on the connection that prepared it.
   */
  cutAtCommitOf(statement: string): Promise<void>;
  close(): Promise<void>;
}

interface CommitCut {
  /** Undefined: any COMMIT. */
  statement?: string;
  resolve: () => void;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  // Outside the ephemeral range: `up()` after `down()` listens on it again, and a port from
  // that range could meanwhile be any outgoing connection's (free-port.ts).
  let port = await freePort();
  let holed = false;
  // Relays that pass nothing while the partition lasts: each resumes at heal().
  const held = new Set<() => void>();
  // Client sides whose server side was dropped during the partition: reset at heal().
  const severed = new Set<net.Socket>();

  const outbounds = new Map<net.Socket, net.Socket>();
  let commitCut: CommitCut | undefined;
  const cut = new Set<net.Socket>();
  let dropTimer: NodeJS.Timeout | undefined;
  const relay = (inbound: net.Socket) => {
    const outbound = net.connect(target.port, target.host);
    // What this connection is doing, for a commit cut: the statements it prepared, its
    // transaction status as of the server's last ReadyForQuery, and whether the open
    // transaction ran the statement whose commit is to be cut.
    const readFrontend = frontendReader();
    const readStatus = readyStatusReader();
    const prepared = new Map<string, string>();
    let unnamed = '';
    let idle = true;
    let armed = false;
    let batchMatched = false;
    const ranCutStatement = (text: string | undefined) =>
      commitCut?.statement !== undefined &&
      text !== undefined &&
      text.includes(commitCut.statement);
    /** True when `chunk` commits what is to be cut. */
    const commitsCutTransaction = (chunk: Buffer): boolean => {
      let commits = false;
      for (const m of readFrontend(chunk)) {
        if (m.type === 'parse') {
          if (m.name) prepared.set(m.name, m.text);
          else unnamed = m.text;
        } else if (m.type === 'bind') {
          if (ranCutStatement(m.statement ? prepared.get(m.statement) : unnamed))
            batchMatched = true;
        } else if (m.type === 'sync') {
          if (batchMatched) {
            if (idle) commits = true;
            else armed = true;
          }
          batchMatched = false;
        } else if (m.type === 'query' && commitCut) {
          if (/^\s*COMMIT\s*;?\s*$/i.test(m.text)) {
            if (armed || commitCut.statement === undefined) commits = true;
          } else if (ranCutStatement(m.text)) {
            if (idle) commits = true;
            else armed = true;
          }
        }
      }
      return commits && commitCut !== undefined;
    };
    outbounds.set(inbound, outbound);
    outbound.on('close', () => outbounds.delete(inbound));
    for (const [a, b] of [
      [inbound, outbound],
      [outbound, inbound],
    ] as const) {
      sockets.add(a);
      a.on('close', () => {
        sockets.delete(a);
        if (cut.has(a)) return; // the server side waits for its answer, then closes
        // The server dropping a held session must not tell the client (it cannot hear).
        if (!(holed && a === outbound)) b.destroy();
        else severed.add(inbound);
      });
      a.on('error', () => b.destroy());
      // Data is forwarded by hand so that a partition can hold it (pause, not drop).
      a.on('data', (chunk: Buffer) => {
        if (a === outbound) {
          const status = readStatus(chunk);
          if (status !== undefined) {
            idle = status === 'I';
            if (idle) armed = false;
          }
        }
        if (a === inbound && commitsCutTransaction(chunk)) {
          const done = commitCut!.resolve;
          commitCut = undefined;
          cut.add(inbound);
          outbound.write(chunk);
          inbound.destroy();
          // Resolved once the server has answered (the commit is done) or gone.
          outbound.once('data', () => outbound.destroy());
          outbound.once('close', () => done());
          return;
        }
        if (!b.write(chunk)) {
          a.pause();
          b.once('drain', () => {
            if (!holed) a.resume();
          });
        }
      });
      if (holed) {
        a.pause();
        held.add(() => a.resume());
      }
    }
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = net.createServer((inbound) => {
        if (!holed) return relay(inbound);
        // A new connection during a partition: its handshake "succeeds" (the kernel accepts)
        // and then nothing comes back until the partition heals.
        sockets.add(inbound);
        inbound.pause();
        inbound.on('close', () => sockets.delete(inbound));
        inbound.on('error', () => {});
        held.add(() => {
          if (!inbound.destroyed) relay(inbound);
          inbound.resume();
        });
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        port = (s.address() as AddressInfo).port;
        server = s;
        resolve();
      });
    });
  const stop = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  };

  await listen();
  return {
    port,
    via(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    down: stop,
    up: listen,
    blackhole(o = {}) {
      holed = true;
      for (const socket of sockets) socket.pause();
      for (const socket of sockets) held.add(() => socket.resume());
      if (o.serverDropsAfterMs !== undefined) {
        dropTimer = setTimeout(() => {
          for (const out of outbounds.values()) out.destroy();
        }, o.serverDropsAfterMs);
        dropTimer.unref();
      }
    },
    heal() {
      clearTimeout(dropTimer);
      for (const s of severed) s.destroy();
      severed.clear();
      holed = false;
      const resume = [...held];
      held.clear();
      for (const r of resume) r();
    },
    cutAtNextCommit() {
      return new Promise<void>((resolve) => {
        commitCut = { resolve };
      });
    },
    cutAtCommitOf(statement) {
      return new Promise<void>((resolve) => {
        commitCut = { statement, resolve };
      });
    },
    close: stop,
  };
}
