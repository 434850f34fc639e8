// A process that serves through serveUntilSignalled: GET /slow answers after SLOW_MS, any
// other path at once. onClose prints a line, so the test sees that it ran before the exit.
import { createLogger } from '@mtg/log';
import { serveUntilSignalled } from '../../src/index.ts';

const slowMs = Number(process.env.SLOW_MS ?? 800);
await serveUntilSignalled(
  (req, res) => {
    if (req.url === '/slow') setTimeout(() => res.end('slow done'), slowMs);
    else res.end('fast');
  },
  {
    port: 0,
    host: '127.0.0.1',
    logger: createLogger('slow-server'),
    service: 'slow-server',
    drainMs: Number(process.env.DRAIN_MS ?? 5_000),
    onClose: async () => {
      process.stdout.write('onClose ran\n');
    },
  },
);
