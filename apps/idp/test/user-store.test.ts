import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createUserStore } from '../src/user-store.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'idp-users-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const zoe = { tenant: 'acme', sub: 'zoe' };

test('a change another process makes to the file counts at this store’s next check', async () => {
  const file = path.join(dir, 'users.json');
  const here = createUserStore(file);
  const there = createUserStore(file);
  expect(await here.ensure(zoe)).toMatchObject({ disabled: false });
  expect(await here.get(zoe)).toMatchObject({ disabled: false });
  await there.setDisabled(zoe, true);
  expect(await here.get(zoe)).toMatchObject({ disabled: true });
});

test('so does an edit by hand in place (same file, rewritten)', async () => {
  const file = path.join(dir, 'users.json');
  const store = createUserStore(file);
  await store.ensure(zoe);
  expect(await store.get(zoe)).toMatchObject({ disabled: false });
  const users = JSON.parse(await readFile(file, 'utf8'));
  for (const u of Object.values<{ disabled: boolean }>(users)) u.disabled = true;
  await writeFile(file, JSON.stringify(users));
  expect(await store.get(zoe)).toMatchObject({ disabled: true });
});
