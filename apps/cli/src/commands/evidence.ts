import { systemClock } from '@mtg/clock';
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { dataDir, loadOrCreateDevSecrets } from '@mtg/dev-secrets';
import { resolveDatabaseUrl } from '../audit/database.ts';
import {
  cancelThenWrites,
  crossPrincipalAccess,
  identicalStarts,
  iteratingIds,
  tokenExpiryMidRun,
  userDisabledMidRun,
  type CheckResult,
} from '../evidence/checks.ts';
import { renderMarkdown } from '../evidence/render.ts';
import {
  bySeq,
  checkTarget,
  headSeq,
  runCoverage,
  syntheticTenants,
} from '../evidence/run-scope.ts';
import { stackClient } from '../evidence/stack-client.ts';

const USAGE = `npm run evidence [-- --out DIR] [--allow-external-database]
Runs the security review's adversarial pass against a running stack (npm start) and writes
evidence/report.md and evidence/report.json. Ports from GATEWAY_PORT, IDP_PORT,
DOWNSTREAM_PORT; database from DATABASE_URL or the running embedded PostgreSQL.

Every request of the pass is audited: it runs in two tenants of its own, synthetic-<run> and
synthetic-<run>-other, and refuses a DATABASE_URL other than the development stack's
embedded database (the pass would write into that chain) unless --allow-external-database.
The report states the period and the chain range it covers.`;

async function main() {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      'allow-external-database': { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return void console.log(USAGE);
  const env = process.env;
  const endpoints = {
    mcp: env.GATEWAY_RESOURCE ?? `http://127.0.0.1:${env.GATEWAY_PORT ?? 3000}/mcp`,
    idp: env.IDP_ISSUER ?? `http://127.0.0.1:${env.IDP_PORT ?? 9400}`,
    downstream: env.DOWNSTREAM_URL ?? `http://127.0.0.1:${env.DOWNSTREAM_PORT ?? 9500}`,
  };
  const { url, where } = await resolveDatabaseUrl(env.DATABASE_URL, dataDir(env));
  const target = checkTarget(where, values['allow-external-database'] === true);
  if (!target.ok) {
    process.stderr.write(`evidence: ${target.message}\n`);
    process.exitCode = 2;
    return;
  }
  const secrets = await loadOrCreateDevSecrets(dataDir(env));
  const stack = stackClient(endpoints, secrets);
  const db = new pg.Client({ connectionString: url, application_name: 'evidence' });
  await db.connect();
  const tenants = syntheticTenants(stack.unique('run').slice(4));
  const ctx = { stack, db, tenants };
  const firstHead = await headSeq(db);
  const tolerance = Number(env.AUTH_CLOCK_TOLERANCE_SECONDS ?? 30);
  const started = systemClock();
  const results: CheckResult[] = [];
  let coverage: Awaited<ReturnType<typeof runCoverage>> | undefined;
  const run = async (name: string, fn: () => Promise<CheckResult>) => {
    process.stderr.write(`evidence: ${name}… `);
    try {
      const r = await fn();
      results.push({ ...r, audit: bySeq(r.audit) });
      process.stderr.write(`${r.passed ? 'PASS' : 'FAIL'}: ${r.summary}\n`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      results.push({
        id: name,
        title: name,
        passed: false,
        summary: `could not run: ${message}`,
        details: {},
        audit: [],
      });
      process.stderr.write(`ERROR: ${message}\n`);
    }
  };
  try {
    // The expiry check waits out the token's lifetime; run it alongside the others.
    const expiry = tokenExpiryMidRun(ctx, tolerance);
    await run('cross-principal-access', () => crossPrincipalAccess(ctx));
    await run('iterating-task-ids', () => iteratingIds(ctx));
    await run('twenty-identical-starts', () => identicalStarts(ctx));
    await run('cancel-then-writes', () => cancelThenWrites(ctx));
    await run('user-disabled-mid-run', () => userDisabledMidRun(ctx));
    await run('token-expiry-mid-run', () => expiry);
    coverage = await runCoverage(db, tenants, { from: started, to: systemClock() }, firstHead);
  } finally {
    await db.end();
  }

  let verification: { exitCode: number; output: string };
  try {
    const output = execFileSync(
      process.execPath,
      [path.join(import.meta.dirname, `audit-verify${path.extname(import.meta.filename)}`)],
      { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    verification = { exitCode: 0, output: output.trim() };
  } catch (error) {
    const e = error as { status?: number; stdout?: string; stderr?: string };
    verification = { exitCode: e.status ?? 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}`.trim() };
  }
  process.stderr.write(
    `evidence: audit:verify exit ${verification.exitCode}: ${verification.output.split('\n')[0]}\n`,
  );

  const report = {
    generatedAt: systemClock().toISOString(),
    startedAt: started.toISOString(),
    endpoints,
    database: where,
    coverage,
    checks: results,
    auditVerification: verification,
  };
  const out = path.resolve(values.out ?? 'evidence');
  await mkdir(out, { recursive: true });
  await writeFile(path.join(out, 'report.json'), JSON.stringify(report, null, 2));
  await writeFile(path.join(out, 'report.md'), renderMarkdown(report));
  const failed = results.filter((r) => !r.passed).length + (verification.exitCode === 0 ? 0 : 1);
  console.log(
    `${results.length - results.filter((r) => !r.passed).length} passed, ${failed} failed — ${path.join(out, 'report.md')}`,
  );
  process.exitCode = failed ? 1 : 0;
}

main().catch((error) => {
  process.stderr.write(`evidence: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 2;
});
