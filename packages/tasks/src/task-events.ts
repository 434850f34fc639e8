import pg from 'pg';

type Listener = (payload: Record<string, unknown>) => void;

/**
 * One dedicated LISTEN connection per process (LISTEN needs a session, not a pooled
 * client), fanning notifications out to in-process listeners. Reconnects after a database
 * restart; while it is down, waiters fall back to their timeouts and re-read the row.
 */
export interface TaskEvents {
  on(channel: string, listener: Listener): () => void;
  /**
   * Resolves true when `taskId` settles, false after timeoutMs or when `signal` aborts. It
   * listens from the call on, once `heard(channel)` resolves: await that before the statement
   * after which a settlement would notify (watch-settle.ts), so none falls between the two.
   */
  waitForSettled(
    taskId: string,
    timeoutMs: number,
    channel: string,
    signal?: AbortSignal,
  ): Promise<boolean>;
  /**
   * Resolves once what is notified on `channel` from now on reaches this process's listeners:
   * at once for a channel listened to from the start; for an on-demand one, when the LISTEN
   * its first listener asked for is in effect. Never rejects: with the connection down it
   * resolves, and waits fall back on their timers.
   */
  heard(channel: string): Promise<void>;
  /**
   * The channels the connection listens to now, as the server says (`pg_listening_channels()`);
   * none while it is down.
   */
  listening(): Promise<string[]>;
  close(): Promise<void>;
}

export interface TaskEventsOptions {
  /**
   * Channels listened to only while a listener in this process wants them: LISTEN when the
   * first comes, UNLISTEN `lingerMs` after the last went. Before PostgreSQL 19 every NOTIFY
   * of the database wakes every session that LISTENs to anything, so a process that listens
   * only while it waits is not woken by the notifications meant for others (a gateway's by
   * every task creation's, which wakes the workers).
   */
  onDemand?: string[];
  /** How long an on-demand channel stays listened to after its last listener (default 10 s). */
  lingerMs?: number;
}

const LINGER_MS = 10_000;

export async function createTaskEvents(
  connectionString: string,
  channels: string[],
  onError: (error: Error) => void = () => {},
  options: TaskEventsOptions = {},
): Promise<TaskEvents> {
  const listeners = new Map<string, Set<Listener>>();
  const onDemand = new Set(options.onDemand ?? []);
  const lingerMs = options.lingerMs ?? LINGER_MS;
  // An on-demand channel listened to (or about to be): its LISTEN in flight or done, and the
  // timer that will UNLISTEN it while nobody listens.
  const wanted = new Map<string, { listened: Promise<void>; linger?: NodeJS.Timeout }>();
  let client: pg.Client | undefined;
  let closed = false;
  let reconnectTimer: NodeJS.Timeout | undefined;

  const command = (verb: 'LISTEN' | 'UNLISTEN', channel: string) =>
    `${verb} ${pg.escapeIdentifier(channel)}`;
  // An on-demand channel's command: a failure is the connection's, whose reconnect listens
  // again to what is wanted.
  const send = (c: pg.Client | undefined, verb: 'LISTEN' | 'UNLISTEN', channel: string) =>
    c
      ? c.query(command(verb, channel)).then(
          () => {},
          () => {},
        )
      : Promise.resolve();

  const connect = async () => {
    const c = new pg.Client({ connectionString, application_name: 'task-events' });
    c.on('notification', (msg) => {
      if (!msg.payload) return;
      let payload: Record<string, unknown>;
      try {
        payload = JSON.parse(msg.payload) as Record<string, unknown>;
      } catch {
        return;
      }
      for (const l of listeners.get(msg.channel) ?? []) l(payload);
    });
    c.on('error', (error) => {
      onError(error);
      scheduleReconnect();
    });
    c.on('end', () => scheduleReconnect());
    await c.connect();
    for (const ch of channels) await c.query(command('LISTEN', ch));
    // From here an on-demand channel wanted meanwhile is listened to on this connection; one
    // wanted before (a reconnect) is heard once its LISTEN here is in effect.
    client = c;
    for (const [ch, w] of wanted) w.listened = send(c, 'LISTEN', ch);
    await Promise.all([...wanted.values()].map((w) => w.listened));
  };
  const scheduleReconnect = () => {
    if (closed || reconnectTimer) return;
    client = undefined;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      connect().catch((error: Error) => {
        onError(error);
        scheduleReconnect();
      });
    }, 500);
    reconnectTimer.unref();
  };

  await connect();

  /** The first listener of an on-demand channel: listen to it, or keep listening. */
  const want = (channel: string) => {
    const w = wanted.get(channel);
    if (w) {
      clearTimeout(w.linger);
      w.linger = undefined;
      return;
    }
    // The client runs its commands in order, so this LISTEN follows any UNLISTEN before it.
    wanted.set(channel, { listened: send(client, 'LISTEN', channel) });
  };
  /** The last listener of an on-demand channel went: stop listening a while later. */
  const unwant = (channel: string) => {
    const w = wanted.get(channel);
    if (!w) return;
    w.linger = setTimeout(() => {
      if (listeners.get(channel)?.size) return;
      wanted.delete(channel);
      void send(client, 'UNLISTEN', channel);
    }, lingerMs);
    w.linger.unref();
  };

  const on = (channel: string, listener: Listener) => {
    let set = listeners.get(channel);
    if (!set) listeners.set(channel, (set = new Set()));
    set.add(listener);
    if (onDemand.has(channel) && set.size === 1) want(channel);
    return () => {
      if (set.delete(listener) && onDemand.has(channel) && set.size === 0) unwant(channel);
    };
  };

  return {
    on,
    waitForSettled(taskId, timeoutMs, channel, signal) {
      return new Promise((resolve) => {
        const end = (settled: boolean) => {
          clearTimeout(timer);
          off();
          signal?.removeEventListener('abort', abort);
          resolve(settled);
        };
        const abort = () => end(false);
        const off = on(channel, (payload) => {
          if (payload.taskId === taskId) end(true);
        });
        const timer = setTimeout(abort, timeoutMs);
        if (signal?.aborted) abort();
        else signal?.addEventListener('abort', abort, { once: true });
      });
    },
    heard(channel) {
      return wanted.get(channel)?.listened ?? Promise.resolve();
    },
    async listening() {
      const r = await client
        ?.query<{ channel: string }>('SELECT pg_listening_channels() AS channel')
        .catch(() => undefined); // the connection is down: it listens to nothing
      return (r?.rows ?? []).map((row) => row.channel).sort();
    },
    async close() {
      closed = true;
      clearTimeout(reconnectTimer);
      for (const w of wanted.values()) clearTimeout(w.linger);
      await client?.end().catch(() => {});
    },
  };
}
