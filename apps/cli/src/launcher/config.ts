import { z } from 'zod';
import { port } from '@mtg/config';

const listenPort = (fallback: number) =>
  port(fallback).refine((p) => p > 0, 'must be a port number from 1 to 65535');

/** The launcher's environment (`npm start`). */
export const launcherConfigSchema = z
  .object({
    /** An existing PostgreSQL (superuser or database owner); unset: start the embedded one. */
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL, or unset for the embedded database')
      .optional(),
    WORKERS: z.coerce
      .number({ error: 'must be an integer from 0 to 32' })
      .int('must be an integer from 0 to 32')
      .min(0, 'must be an integer from 0 to 32')
      .max(32, 'must be an integer from 0 to 32')
      .default(2),
    GATEWAY_PORT: listenPort(3000),
    IDP_PORT: listenPort(9400),
    DOWNSTREAM_PORT: listenPort(9500),
    /** The demo upstream MCP server (apps/upstream-demo), registered in UPSTREAMS_FILE. */
    UPSTREAM_DEMO_PORT: listenPort(9600),
    CONSOLE_PORT: listenPort(9700),
    /** Where dev secrets and the embedded cluster live; default `.data/` in the repository. */
    DATA_DIR: z.string().min(1).optional(),
    /** Port of the embedded PostgreSQL; default 54329, else any free port. */
    EMBEDDED_PG_PORT: listenPort(0).optional(),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
    /**
     * First port of the workers' metrics endpoints: worker-N listens on this + N - 1 (one
     * number for all would make the second worker fail to bind). Unset or 0: none.
     */
    WORKER_METRICS_PORT: port(0),
    /**
     * Seconds between the checkpoints the stack signs (`audit checkpoint --every`, with the dev
     * keys in DATA_DIR/audit), as the CronJob does in Kubernetes; 0: none.
     */
    AUDIT_CHECKPOINT_EVERY: z.coerce
      .number({ error: 'must be a number of seconds (0: no checkpoints)' })
      .min(0, 'must be a number of seconds (0: no checkpoints)')
      .default(15),
  })
  .superRefine((c, ctx) => {
    // Every port the stack listens on, so that two processes never race for one: the first
    // to bind wins and the other fails its start with EADDRINUSE, far from the cause.
    const ports = listenedPorts(c);
    for (const [i, [name, p]] of ports.entries()) {
      const earlier = ports.slice(0, i).find(([, q]) => q === p);
      if (earlier)
        ctx.addIssue({ code: 'custom', path: [name], message: `${p} is also ${earlier[0]}` });
    }
    if (!c.WORKER_METRICS_PORT || c.WORKERS === 0) return;
    const last = c.WORKER_METRICS_PORT + c.WORKERS - 1;
    const problem =
      last > 65535
        ? `leaves no room for ${c.WORKERS} workers (ports up to ${last} needed)`
        : ports
            .filter(([, p]) => p >= c.WORKER_METRICS_PORT && p <= last)
            .map(
              ([name]) => `ports ${c.WORKER_METRICS_PORT}-${last} (one per worker) include ${name}`,
            )[0];
    if (problem) ctx.addIssue({ code: 'custom', path: ['WORKER_METRICS_PORT'], message: problem });
  });

/** The embedded PostgreSQL's port when EMBEDDED_PG_PORT is unset (packages/dev-postgres). */
const EMBEDDED_PG_DEFAULT_PORT = 54329;

/**
 * The ports of the stack by variable, in start order. The embedded PostgreSQL's only when the
 * launcher starts it (no DATABASE_URL); unset, its default, which it binds when that is free.
 */
function listenedPorts(c: {
  DATABASE_URL?: string | undefined;
  EMBEDDED_PG_PORT?: number | undefined;
  GATEWAY_PORT: number;
  IDP_PORT: number;
  DOWNSTREAM_PORT: number;
  UPSTREAM_DEMO_PORT: number;
  CONSOLE_PORT: number;
}): Array<[string, number]> {
  return [
    ...(c.DATABASE_URL
      ? []
      : [['EMBEDDED_PG_PORT', c.EMBEDDED_PG_PORT ?? EMBEDDED_PG_DEFAULT_PORT] as [string, number]]),
    ['IDP_PORT', c.IDP_PORT],
    ['DOWNSTREAM_PORT', c.DOWNSTREAM_PORT],
    ['UPSTREAM_DEMO_PORT', c.UPSTREAM_DEMO_PORT],
    ['GATEWAY_PORT', c.GATEWAY_PORT],
    ['CONSOLE_PORT', c.CONSOLE_PORT],
  ];
}

export type LauncherConfig = z.infer<typeof launcherConfigSchema>;
