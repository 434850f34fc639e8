import http from 'node:http';
import { createRemoteJWKSet } from 'jose';
import { z } from 'zod';
import { ConfigError, parseConfig, port, url } from '@mtg/config';
import { createUpstreamDemo } from './create-upstream-demo.ts';

const schema = z
  .object({
    UPSTREAM_DEMO_PORT: port(9600),
    UPSTREAM_DEMO_HOST: z.string().min(1).default('127.0.0.1'),
    /** Its resource URL (the audience its tokens must carry); default: its own /mcp URL. */
    UPSTREAM_DEMO_RESOURCE: url().optional(),
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    UPSTREAM_DEMO_STEP_MS: z.coerce.number().int().min(10).default(1500),
    /** The task wire it offers (docs/upstreams.md). */
    UPSTREAM_DEMO_TASKS_WIRE: z.enum(['2025-11-25', '2026-07-28']).default('2025-11-25'),
  })
  .transform((c) => ({
    ...c,
    resource: c.UPSTREAM_DEMO_RESOURCE ?? `http://127.0.0.1:${c.UPSTREAM_DEMO_PORT}/mcp`,
    issuer: c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400',
  }));

function main() {
  let config;
  try {
    config = parseConfig(schema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`upstream-demo: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const demo = createUpstreamDemo({
    resource: config.resource,
    issuer: config.issuer,
    keys: createRemoteJWKSet(new URL(`${config.issuer}/jwks`)),
    stepMs: config.UPSTREAM_DEMO_STEP_MS,
    tasksWire: config.UPSTREAM_DEMO_TASKS_WIRE,
  });
  const server = http.createServer(demo.app);
  server.listen(config.UPSTREAM_DEMO_PORT, config.UPSTREAM_DEMO_HOST, () => {
    process.send?.({ type: 'ready', service: 'upstream-demo', url: config.resource });
  });
  const stop = () => {
    demo.close();
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}

main();
