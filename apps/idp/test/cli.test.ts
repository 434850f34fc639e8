import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { decode, RESOURCES, startTestIdp, type TestIdp } from './support/test-idp.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../..', import.meta.url));

/** Runs a script the way `npm run -s` does: same node, repository root as cwd. */
async function script(
  name: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      [path.join(root, 'scripts', name), ...args],
      {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', ...env },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('token and idp:user scripts', () => {
  let idp: TestIdp;
  let env: Record<string, string>;
  beforeAll(async () => {
    idp = await startTestIdp();
    env = {
      IDP_ISSUER: idp.issuer,
      IDP_CLIENT_SECRETS: JSON.stringify(idp.secrets.clientSecrets),
      IDP_ADMIN_TOKEN: idp.secrets.idpAdminToken,
      GATEWAY_RESOURCE: RESOURCES.gateway,
      DATA_DIR: idp.dataDir,
    };
  });
  afterAll(() => idp.close());

  test('token prints only the access token of the user', async () => {
    const result = await script(
      'token.ts',
      ['--sub', 'alice', '--tenant', 'acme', '--ttl', '120'],
      env,
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const { payload } = decode(result.stdout.trim());
    expect(payload).toMatchObject({
      sub: 'alice',
      tenant: 'acme',
      aud: RESOURCES.gateway,
      client_id: 'mcp-agent',
    });
    expect(payload.exp! - payload.iat!).toBe(120);
  });

  test('idp:user disables the user, and token then fails with the reason', async () => {
    const disabled = await script(
      'idp-user.ts',
      ['disable', '--sub', 'zoe', '--tenant', 'acme'],
      env,
    );
    expect(disabled.code).toBe(0);
    expect(disabled.stdout).toContain('user zoe (tenant acme) disabled');

    const refused = await script('token.ts', ['--sub', 'zoe', '--tenant', 'acme'], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain('user zoe in tenant acme is disabled');

    const enabled = await script(
      'idp-user.ts',
      ['enable', '--sub', 'zoe', '--tenant', 'acme'],
      env,
    );
    expect(enabled.stdout).toContain('enabled');
  });

  test('when the IdP is not running both scripts say to run npm start', async () => {
    const down = { ...env, IDP_ISSUER: 'http://127.0.0.1:9' };
    const token = await script('token.ts', ['--sub', 'alice', '--tenant', 'acme'], down);
    expect(token.code).not.toBe(0);
    expect(token.stderr).toContain('npm start');
    const user = await script(
      'idp-user.ts',
      ['disable', '--sub', 'alice', '--tenant', 'acme'],
      down,
    );
    expect(user.code).not.toBe(0);
    expect(user.stderr).toContain('npm start');
  });
});
