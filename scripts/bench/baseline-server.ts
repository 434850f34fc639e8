// The poll baseline: the least a task-status endpoint can do. Express 5, a jose verification
// of the bearer token against the IdP's JWKS (signature, issuer, audience, expiry), and one
// primary-key SELECT that also checks the owner. No MCP, no audit, no authorization model
// beyond tenant + subject. Env: PORT, DATABASE_URL, ISSUER, AUDIENCE.
import express from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { createPool } from '@mtg/db';

const env = process.env;
const pool = createPool({
  connectionString: env.DATABASE_URL!,
  role: 'mtg_gateway',
  max: 20,
  applicationName: 'bench-baseline',
});
const keys = createRemoteJWKSet(new URL(`${env.ISSUER}/jwks`));
const app = express();
app.disable('x-powered-by');
app.get('/tasks/:id', async (req, res) => {
  const auth = req.headers.authorization ?? '';
  if (!auth.startsWith('Bearer ')) {
    res.status(401).json({ error: 'invalid_token' });
    return;
  }
  let claims;
  try {
    ({ payload: claims } = await jwtVerify(auth.slice(7), keys, {
      issuer: env.ISSUER!,
      audience: env.AUDIENCE!,
    }));
  } catch {
    res.status(401).json({ error: 'invalid_token' });
    return;
  }
  const r = await pool.query(
    `SELECT id, status, status_message, created_at, updated_at, ttl_ms, poll_interval_ms
       FROM app.tasks WHERE id = $1 AND tenant = $2 AND subject = $3`,
    [req.params.id, claims.tenant, claims.sub],
  );
  if (!r.rows[0]) {
    res.status(404).json({ error: 'not_found' });
    return;
  }
  res.json(r.rows[0]);
});
const server = app.listen(Number(env.PORT), '127.0.0.1', () =>
  process.send?.({ type: 'ready', service: 'baseline' }),
);
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void pool.end().then(() => process.exit(0));
});
process.on('disconnect', () => process.exit(0));
