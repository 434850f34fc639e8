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
   * listens from the call on: call it before the statement after which a settlement would
   * notify (watch-settle.ts), so none falls between the two.
   */
  waitForSettled(
    taskId: string,
    timeoutMs: number,
    channel: string,
    signal?: AbortSignal,
  ): Promise<boolean>;
  close(): Promise<void>;
}

export async function createTaskEvents(
  connectionString: string,
  channels: string[],
  onError: (error: Error) => void = () => {},
): Promise<TaskEvents> {
  const listeners = new Map<string, Set<Listener>>();
  let client: pg.Client | undefined;
  let closed = false;
  let reconnectTimer: NodeJS.Timeout | undefined;

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
    for (const ch of channels) await c.query(`LISTEN ${pg.escapeIdentifier(ch)}`);
    client = c;
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

  const on = (channel: string, listener: Listener) => {
    let set = listeners.get(channel);
    if (!set) listeners.set(channel, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
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
    async close() {
      closed = true;
      clearTimeout(reconnectTimer);
      await client?.end().catch(() => {});
    },
  };
}
