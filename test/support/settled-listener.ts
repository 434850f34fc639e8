import pg from 'pg';
import { pollUntil } from './poll.ts';

const CHANNEL = 'mtg_task_settled';

/**
 * A session LISTENing to `mtg_task_settled`, for tests of who an ending notifies. `soFar`
 * says exactly what the channel carried until now, absences included: it notifies a marker
 * after everything before it committed, and notifications arrive in commit order, so once the
 * marker is heard every earlier notification has been.
 */
export async function listenSettled(url: string) {
  const heard: string[] = [];
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  client.on('notification', (m) => heard.push(JSON.parse(m.payload!).taskId as string));
  await client.query(`LISTEN ${CHANNEL}`);
  let markers = 0;
  return {
    /** The task ids notified so far. */
    async soFar(): Promise<string[]> {
      const marker = `marker-${++markers}`;
      await client.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ taskId: marker })]);
      await pollUntil(
        async () => heard.includes(marker),
        (found) => found,
      );
      return heard.filter((id) => !id.startsWith('marker-'));
    },
    close: () => client.end(),
  };
}
