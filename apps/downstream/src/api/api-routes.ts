import express, { Router, type Request, type Response } from 'express';
import type { JWTVerifyGetKey } from 'jose';
import { prepared, runPrepared, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { rememberingVerifier, type DownstreamCaller } from './verify-downstream-token.ts';

// Prepared, as the product's statements are: parsed and planned once per pooled session
// (about 35 µs of the backend's CPU a write, measured alone).
const WRITE = prepared(
  `INSERT INTO downstream.writes (idempotency_key, task_id, method, path, body, sub, act, client)
   VALUES ($1, $2, 'POST', $3, $4, $5, $6, $7)
   ON CONFLICT (idempotency_key) DO NOTHING RETURNING at`,
);

/** Which scope each kind of operation needs. */
function scopeFor(path: string): string | undefined {
  if (path.startsWith('/namespaces')) return 'env:provision';
  if (path.startsWith('/collections')) return 'records:write';
  if (path.startsWith('/reports')) return 'reports:run';
  return undefined;
}

/**
 * The demo downstream API. Writes (POST) need an Idempotency-Key and an X-Task-Id; a key
 * seen before returns the recorded write without writing again. A write whose client went
 * away (aborted) before its statement is not written, so an aborted call never lands
 * afterwards; the write is one statement, committed on its own.
 */
export function apiRoutes(deps: {
  pool: Pool;
  keys: JWTVerifyGetKey;
  issuer: string;
  audience: string;
  logger: Logger;
}): Router {
  const router = Router();
  router.use(express.json({ limit: '256kb' }));
  const verify = rememberingVerifier(deps);

  const authenticate = async (
    req: Request,
    res: Response,
  ): Promise<DownstreamCaller | undefined> => {
    const header = req.headers.authorization ?? '';
    const token = /^Bearer ([^\s]+)$/i.exec(header)?.[1];
    if (!token) {
      res
        .status(401)
        .set('WWW-Authenticate', 'Bearer')
        .json({ error: 'invalid_token', error_description: 'missing token' });
      return undefined;
    }
    const v = await verify(token);
    if (!v.ok) {
      res
        .status(401)
        .set('WWW-Authenticate', 'Bearer error="invalid_token"')
        .json({ error: 'invalid_token', error_description: v.description });
      return undefined;
    }
    // Work for a user must be done with a delegated credential (sub = the user, act = the
    // service acting): a service's bare client-credentials token is refused here.
    if (!v.caller.act) {
      res.status(403).json({
        error: 'user_context_required',
        error_description:
          'this API acts for users: present a delegated token (with an act claim), not a bare service token',
      });
      return undefined;
    }
    const needed = scopeFor(req.path);
    if (needed && !v.caller.scopes.includes(needed)) {
      res.status(403).json({ error: 'insufficient_scope', scope: needed });
      return undefined;
    }
    return v.caller;
  };

  router.get('/reports/source', async (req, res) => {
    const caller = await authenticate(req, res);
    if (!caller) return;
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a query value, echoed as the demo's report name
    const report = String(req.query.report ?? '');
    const rows = Math.min(Number(req.query.rows ?? 100) || 100, 1_000_000);
    res.json({
      source: report,
      rows,
      readFor: caller.sub,
      sample: [{ id: 1, value: report.length }],
    });
  });

  router.post(/.*/, async (req, res) => {
    const caller = await authenticate(req, res);
    if (!caller) return;
    const key = req.headers['idempotency-key'];
    const taskId = req.headers['x-task-id'];
    if (
      typeof key !== 'string' ||
      !key ||
      key.length > 300 ||
      typeof taskId !== 'string' ||
      !taskId
    ) {
      res.status(400).json({
        error: 'invalid_request',
        error_description: 'Idempotency-Key and X-Task-Id headers are required',
      });
      return;
    }
    if (req.socket.destroyed || res.closed) {
      // The caller aborted (e.g. its task was cancelled) before the write: it does not land.
      deps.logger.info('write aborted by caller, not written', { taskId, key });
      return;
    }
    // One statement, its own transaction: the write and its commit are one round trip.
    const inserted = await runPrepared<{ at: Date }>(deps.pool, WRITE, [
      key,
      taskId,
      req.path,
      JSON.stringify(req.body ?? {}),
      caller.sub,
      caller.act ? JSON.stringify(caller.act) : null,
      caller.client,
    ]);
    if (inserted.rowCount === 0) {
      res.status(200).json({ ok: true, deduplicated: true, idempotencyKey: key });
    } else {
      res
        .status(201)
        .json({ ok: true, deduplicated: false, idempotencyKey: key, at: inserted.rows[0]!.at });
    }
  });
  return router;
}

/** GET /_writes?taskId=… — what landed, for tests and demos (loopback dev server only). */
export function writesRoute(pool: Pool): Router {
  const router = Router();
  router.get('/_writes', async (req, res) => {
    const taskId = typeof req.query.taskId === 'string' ? req.query.taskId : undefined;
    const r = await pool.query<{
      task_id: string;
      idempotency_key: string;
      sub: string;
      act: unknown;
      at: Date;
      path: string;
    }>(
      `SELECT task_id, idempotency_key, sub, act, at, path FROM downstream.writes
        WHERE $1::text IS NULL OR task_id = $1 ORDER BY at, idempotency_key LIMIT 10000`,
      [taskId ?? null],
    );
    res.json(
      r.rows.map((w) => ({
        taskId: w.task_id,
        idempotencyKey: w.idempotency_key,
        sub: w.sub,
        act: w.act ?? null,
        at: w.at.toISOString(),
        path: w.path,
      })),
    );
  });
  return router;
}
