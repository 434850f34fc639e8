import pg from 'pg';
import { createPool, ROLES } from '@mtg/db';
import { CATALOGUE_CHANNEL } from '../src/index.ts';
import { replaceCatalogue, type CatalogueEntry } from '../src/catalogue-store.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

// catalogue-store.ts: a listing that changes the stored catalogue tells the workers
// (CATALOGUE_CHANNEL, on commit), so they re-read it then; one that changes nothing is silent,
// so idle workers read nothing.
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const entry = (fingerprint: string): CatalogueEntry => ({
  upstream: 'demo',
  name: 'demo.build_artifact',
  upstreamName: 'build_artifact',
  title: null,
  description: 'Builds an artifact',
  inputSchema: { type: 'object' },
  taskSupport: 'required',
  fingerprint,
});

test('a listing that changes the catalogue notifies the workers; one that changes nothing does not', async () => {
  const gateway = createPool({ connectionString: db.logins.gateway, role: ROLES.gateway });
  const listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  const seen: string[] = [];
  listener.on('notification', (m) => seen.push(m.payload ?? ''));
  await listener.query(`LISTEN ${CATALOGUE_CHANNEL}`);
  // Notifications reach one session in commit order: once this one is seen, so were those before.
  const sentinel = async (n: number) => {
    await gateway.query('SELECT pg_notify($1, $2)', [CATALOGUE_CHANNEL, `sentinel-${n}`]);
    for (let i = 0; i < 500 && !seen.includes(`sentinel-${n}`); i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(seen).toContain(`sentinel-${n}`);
  };
  try {
    expect((await replaceCatalogue(gateway, 'demo', [entry('f1')])).changed).toBe(true);
    expect((await replaceCatalogue(gateway, 'demo', [entry('f1')])).changed).toBe(false);
    await sentinel(1);
    expect(seen).toEqual([JSON.stringify({ upstream: 'demo' }), 'sentinel-1']);
    expect((await replaceCatalogue(gateway, 'demo', [entry('f2')])).changed).toBe(true);
    expect((await replaceCatalogue(gateway, 'demo', [])).changed).toBe(true);
    await sentinel(2);
    expect(seen.slice(2)).toEqual([
      JSON.stringify({ upstream: 'demo' }),
      JSON.stringify({ upstream: 'demo' }),
      'sentinel-2',
    ]);
  } finally {
    await listener.end();
    await gateway.end();
  }
});
