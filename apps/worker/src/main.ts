import { ConfigError, parseConfig } from '@mtg/config';
import { createPool } from '@mtg/db';
import { createLogger } from '@mtg/log';
import { workerConfigSchema } from './config.ts';
import { createWorker } from './create-worker.ts';

async function main() {
  let config;
  try {
    config = parseConfig(workerConfigSchema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const workerId = config.WORKER_ID ?? `worker-${process.pid}`;
  const logger = createLogger('worker', { level: config.LOG_LEVEL }).child({ workerId });
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: workerId,
  });
  const worker = createWorker({ db: pool, logger, workerId, role: config.DATABASE_ROLE });

  let stopping = false;
  const stop = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping', { reason });
    await worker.stop();
    await pool.end();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // Started by the launcher, which has gone away without stopping us (e.g. SIGKILLed).
  process.on('disconnect', () => void stop('launcher gone'));

  await worker.start();
  process.send?.({ type: 'ready', service: 'worker', workerId });
}

main().catch((error) => {
  process.stderr.write(`worker: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
