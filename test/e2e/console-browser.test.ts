// The console in headless Chromium (Debian's, through playwright-core): logins through the
// dev IdP as an auditor, an operator and a user; task search and timeline with chain status;
// the denials chart; CSV export against the database; an operator's cancel; tenant and role
// boundaries; CSRF and CSP; worker pools on the queues page (two pools with different
// WORKER_TOOLS, and a queue no worker serves). Also takes the screenshots of docs/console.md.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { checkpointScript, verifyScript } from '../../packages/audit/test/support/run-script.ts';
import { launchChromium, logIn, newContext, screenshotDir } from '../support/browser.ts';
import { startConsole, type TestConsole } from '../support/console.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { coreWire } from '../support/wires.ts';

let stack: Stack;
let consoleApp: TestConsole;
let browser: Browser;
let dataDir: string;
let shots: string;
let reportTask: string;
let longTask: string;
let otherTask: string;
let unservedTask: string;

beforeAll(async () => {
  // Two pools, as WORKER_TOOLS makes them: reports (two workers) and bulk updates (one);
  // nobody serves provision_test_environment. Each worker with its metrics endpoint.
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '150' } });
  const metricsEndpoints = [{ name: 'gateway', url: `${stack.gatewayUrl}/metrics` }];
  for (const [id, tools] of [
    ['reports-1', 'generate_report'],
    ['reports-2', 'generate_report'],
    ['bulk-1', 'bulk_update_records'],
  ] as const) {
    const port = await freePort();
    await stack.addWorker({
      WORKER_ID: id,
      WORKER_TOOLS: tools,
      WORKER_METRICS_PORT: String(port),
    });
    metricsEndpoints.push({ name: id, url: `http://127.0.0.1:${port}/metrics` });
  }
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-console-'));
  const wire = coreWire(stack.mcpUrl);
  const nia = await stack.token('nia', 'acme');
  reportTask = await wire.start(nia, 'generate_report', { report: 'quarterly' });
  otherTask = await wire.start(await stack.token('lee', 'acme'), 'generate_report', {
    report: 'lee-own',
  });
  await pollUntil(
    () => wire.get(nia, reportTask),
    (a) => a.ok && a.value.status === 'completed',
    20_000,
    100,
    'the report task completes',
  );
  // Work that will not run: no live worker serves its queue.
  unservedTask = await wire.start(
    await stack.token('quinn', 'acme'),
    'provision_test_environment',
    {
      branch: 'feature-x',
      services: ['api'],
    },
  );
  // A denial by another user of the same tenant: mallory asks for nia's task.
  const mallory = await stack.token('mallory', 'acme');
  await wire.get(mallory, reportTask);
  await wire.cancel(mallory, reportTask);
  // And one at the HTTP layer: lee, no administrator, tries the admin API.
  await fetch(`${stack.gatewayUrl}/admin/principals/revoke`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await stack.token('lee', 'acme')}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ subject: 'nia' }),
  });
  // Signed checkpoint over the head, with the dev key in dataDir.
  const signed = await checkpointScript([], { DATABASE_URL: stack.db.url, DATA_DIR: dataDir });
  if (signed.code !== 0) throw new Error(signed.stderr);
  consoleApp = await startConsole(stack, {
    jwksFile: path.join(dataDir, 'audit', 'jwks.json'),
    metricsEndpoints,
  });
  browser = await launchChromium();
  shots = await screenshotDir();
});
afterAll(async () => {
  await browser?.close();
  await consoleApp?.close();
  await stack?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/**
 * A request from inside the page (its cookies, its origin), as a script of the console's
 * own origin or a download link would send it.
 */
async function fetchIn(page: Page, url: string, form?: Record<string, string>) {
  return page.evaluate(
    async ({ url, form }) => {
      const r = await fetch(url, form ? { method: 'POST', body: new URLSearchParams(form) } : {});
      return { status: r.status, type: r.headers.get('content-type') ?? '', text: await r.text() };
    },
    { url, form },
  );
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(shots, `${name}.png`), type: 'png' });

test('an auditor logs in through the dev IdP, searches a task and opens its timeline with its chain status', async () => {
  const context = await newContext(browser);
  const login = await context.newPage();
  await login.goto(`${consoleApp.url}/login`);
  await shot(login, 'login');
  await login.close();
  const page = await logIn(context, consoleApp.url, 'auditor', { sub: 'ada', tenant: 'acme' });
  expect(await page.locator('header .who').innerText()).toContain('ada · acme · auditor');
  await page.fill('input[name=user]', 'nia');
  await page.selectOption('select[name=status]', 'completed');
  await page.click('form.search button');
  const links = page.locator('a.task-link');
  expect(await links.allTextContents()).toEqual([reportTask]);
  await shot(page, 'tasks');

  await links.first().click();
  await page.waitForURL(`${consoleApp.url}/tasks/${reportTask}`);
  const types = await page.locator('.event-type').allTextContents();
  expect(types[0]).toBe('task.created');
  expect(types).toEqual(
    expect.arrayContaining(['task.delegated', 'task.completed', 'task.denied']),
  );
  const rows = await sql(
    stack.db.url,
    'SELECT type FROM audit.events WHERE task_id = $1 ORDER BY seq',
    [reportTask],
  );
  expect(types).toEqual(rows.map((r) => r.type));
  expect(await page.locator('#chain-status').innerText()).toMatch(
    /verified up to the checkpoint of \S+, signed by key \S+/,
  );
  expect((await page.locator('#task-status').innerText()).trim()).toBe('completed');
  await shot(page, 'task');
  await context.close();
});

test('a denial made by another user appears in the denials chart and the top subjects', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'auditor', { sub: 'ada', tenant: 'acme' });
  await page.goto(`${consoleApp.url}/denials?since=24h`);
  await page.waitForSelector('#denials-chart[data-rendered]');
  const denials = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.denials WHERE tenant = 'acme'`,
  );
  expect(Number(await page.locator('#denials-chart').getAttribute('data-rendered'))).toBe(
    denials[0].n,
  );
  expect(denials[0].n).toBeGreaterThan(0);
  expect(await page.locator('#top-subjects').locator('..').innerText()).toContain('mallory');
  // The gateway records the client address of each denial (origin.ip): here, loopback.
  expect(await page.locator('#top-ips').locator('..').innerText()).toMatch(/127\.0\.0\.1/);
  await shot(page, 'denials');

  // The CSV export, with the page's own session, row for row against the database.
  const csv = await fetchIn(page, '/denials?since=24h&format=csv');
  expect(csv.status).toBe(200);
  expect(csv.type).toMatch(/^text\/csv/);
  const lines = csv.text.trim().split('\r\n');
  expect(lines[0]).toBe('seq,occurred_at,type,reason,subject,client,client_ip,tool,verb,task_id');
  const expected = await sql(
    stack.db.url,
    `SELECT seq::int, type, reason, subject, body::jsonb -> 'origin' ->> 'ip' AS ip FROM audit.events
      WHERE tenant = 'acme' AND type IN ('task.denied', 'auth.denied') ORDER BY seq DESC`,
  );
  expect(lines.slice(1).map((l) => l.split(','))).toEqual(
    expected.map((r) => [
      String(r.seq),
      expect.any(String),
      r.type,
      r.reason ?? '',
      r.subject ?? '',
      expect.any(String),
      r.ip ?? '',
      expect.any(String),
      expect.any(String),
      expect.any(String),
    ]),
  );
  const json = await fetchIn(page, '/denials?since=24h&format=json');
  expect(JSON.parse(json.text).map((r: { seq: number }) => r.seq)).toEqual(
    expected.map((r) => r.seq),
  );
  await context.close();
});

test('an operator cancels a running task: it stops, and the cancel is in its timeline', async () => {
  longTask = await coreWire(stack.mcpUrl).start(
    await stack.token('kim', 'acme'),
    'bulk_update_records',
    {
      collection: 'console',
      count: 20_000,
      patch: { y: 1 },
    },
  );
  await pollUntil(
    () => stack.writes(longTask),
    (w) => w.length >= 1,
    10_000,
    50,
    'the task is running',
  );
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'operator', { sub: 'olga', tenant: 'acme' });
  await page.goto(`${consoleApp.url}/tasks/${longTask}`);
  await page.click('#cancel-task');
  expect(await page.locator('#action-result').innerText()).toContain('Cancelled');
  expect((await page.locator('#task-status').innerText()).trim()).toBe('cancelled');
  const [row] = await sql(stack.db.url, 'SELECT status, ended_by FROM app.tasks WHERE id = $1', [
    longTask,
  ]);
  expect(row).toMatchObject({ status: 'cancelled', ended_by: { path: 'admin' } });
  const cancel = await sql(
    stack.db.url,
    `SELECT type, actor_subject FROM audit.events WHERE task_id = $1 AND actor_subject = 'olga'`,
    [longTask],
  );
  expect(cancel.length).toBeGreaterThan(0);
  // The operator's cancel is the admin path, not a refusal: no denial against the task.
  const types = await sql(stack.db.url, 'SELECT type FROM audit.events WHERE task_id = $1', [
    longTask,
  ]);
  expect(types.filter((e) => e.type === 'task.denied')).toEqual([]);
  expect(types.filter((e) => e.type === 'task.admin_cancelled')).toHaveLength(1);
  expect(await page.locator('table').last().innerText()).toContain('olga');
  const before = (await stack.writes(longTask)).length;
  await new Promise((r) => setTimeout(r, 600));
  expect((await stack.writes(longTask)).length).toBe(before);
  await shot(page, 'task-cancelled');
  await context.close();
});

test('a user sees only their own tasks, and cannot reach auditor pages by URL', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'user', { sub: 'lee', tenant: 'acme' });
  expect(await page.locator('a.task-link').allTextContents()).toEqual([otherTask]);
  expect(await page.locator('header nav').innerText()).not.toContain('Denials');
  const denied = await page.goto(`${consoleApp.url}/denials`);
  expect(denied!.status()).toBe(403);
  expect((await page.goto(`${consoleApp.url}/tasks/${reportTask}`))!.status()).toBe(404);
  expect((await page.goto(`${consoleApp.url}/chain`))!.status()).toBe(403);
  expect((await page.goto(`${consoleApp.url}/queues`))!.status()).toBe(403);
  await page.goto(`${consoleApp.url}/tasks`);
  const export_ = await fetchIn(page, '/tasks?format=csv');
  expect(export_.status).toBe(200);
  const csv = export_.text;
  expect(csv).toContain(otherTask);
  expect(csv).not.toContain(reportTask);
  await context.close();
});

test('an auditor of another tenant sees nothing of this one', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'auditor', { sub: 'ada', tenant: 'globex' });
  expect(await page.locator('a.task-link').count()).toBe(0);
  expect(await page.locator('header nav').innerText()).not.toContain('Queues');
  expect((await fetchIn(page, '/queues')).status).toBe(403);
  expect((await page.goto(`${consoleApp.url}/tasks/${reportTask}`))!.status()).toBe(404);
  await page.goto(`${consoleApp.url}/denials?since=24h`);
  await page.waitForSelector('#denials-chart[data-rendered]');
  expect(await page.locator('#denials-chart').getAttribute('data-rendered')).toBe('0');
  expect(JSON.parse((await fetchIn(page, '/principals?sub=nia&format=json')).text)).toEqual([]);
  expect((await fetchIn(page, `/tasks/${reportTask}/bundle`)).status).toBe(404);
  await context.close();
});

test('security: a form posted without the CSRF token is refused, the CSP header is on every page, a user cannot act', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'operator', { sub: 'olga', tenant: 'acme' });
  const response = await page.goto(`${consoleApp.url}/tasks`);
  const csp = response!.headers()['content-security-policy'];
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("frame-ancestors 'none'");
  const cookies = await context.cookies();
  expect(cookies.find((c) => c.name === 'mtg_console')).toMatchObject({
    httpOnly: true,
    secure: true,
    sameSite: 'Lax',
  });

  const noToken = await fetchIn(page, '/principals/revoke', { subject: 'nia' });
  expect(noToken.status).toBe(403);
  expect(noToken.text).toContain('csrf_mismatch');
  // Bad input is a 400 naming the field, not a database error.
  const badTime = await fetchIn(page, '/tasks?from=yesterday');
  expect(badTime.status).toBe(400);
  expect(badTime.text).toContain('from: must be a date and time');
  const badSince = await fetchIn(page, '/denials?since=forever');
  expect(badSince.status).toBe(400);
  expect(badSince.text).toContain('since: must be like 24h or 7d');
  const wrongToken = await fetchIn(page, `/tasks/${otherTask}/cancel`, { csrf: 'x'.repeat(43) });
  expect(wrongToken.status).toBe(403);
  const revoked = await sql(
    stack.db.url,
    `SELECT 1 FROM audit.events WHERE type = 'principal.revoked'`,
  );
  expect(revoked).toEqual([]);

  // A user with a valid session and token still cannot act: the console refuses the role.
  const userContext = await newContext(browser);
  const user = await logIn(userContext, consoleApp.url, 'user', { sub: 'lee', tenant: 'acme' });
  const csrf = await user.locator('header form input[name=csrf]').getAttribute('value');
  const asUser = await fetchIn(user, '/principals/revoke', { csrf: csrf!, subject: 'nia' });
  expect(asUser.status).toBe(403);
  expect(asUser.text).toContain('role_required');
  await userContext.close();
  await context.close();
});

test('an operator revokes and restores a principal through the gateway; the revocations and chain pages show it', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'operator', { sub: 'olga', tenant: 'acme' });
  await page.goto(`${consoleApp.url}/principals?sub=mallory`);
  await page
    .locator('#revoke-principal')
    .locator('..')
    .locator('input[name=reason]')
    .fill('suspicious reads');
  await page.click('#revoke-principal');
  expect(await page.locator('#action-result').innerText()).toContain('mallory revoked');
  await page.click('#restore-principal');
  expect(await page.locator('#action-result').innerText()).toContain('mallory restored');
  await shot(page, 'principal');
  await page.goto(`${consoleApp.url}/revocations`);
  expect(await page.locator('table').innerText()).toContain('principal.revoked');
  expect(await page.locator('table').innerText()).toContain('principal.restored');
  // The reason the operator typed, not only how (`admin`).
  expect(await page.locator('table').innerText()).toContain('suspicious reads');
  await shot(page, 'revocations');
  await page.goto(`${consoleApp.url}/chain`);
  expect(await page.locator('#chain-verdict').innerText()).toContain('intact');
  expect(await page.locator('#chain-uncovered').innerText()).toContain('event(s)');
  await shot(page, 'chain');
  await page.goto(`${consoleApp.url}/evidence`);
  await shot(page, 'evidence');

  // Queues and workers, from the gateway's Prometheus endpoint: operators only.
  await page.goto(`${consoleApp.url}/queues`);
  expect(await page.locator('#queue-jobs').innerText()).toMatch(
    /queued\s+\d+[\s\S]*active\s+\d+|active\s+\d+[\s\S]*queued\s+\d+/,
  );
  const statuses = await page.locator('#task-statuses').innerText();
  const [completed] = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM app.tasks WHERE status = 'completed'`,
  );
  expect(statuses).toMatch(/completed\s+\d+/);
  expect(Number(/completed\s+(\d+)/.exec(statuses)![1])).toBeLessThanOrEqual(completed.n);
  // One row per long tool's queue (the demo pack's three).
  expect(await page.locator('#queue-depth').innerText()).toMatch(
    /bulk_update_records\s+\S+\s+\d+\s+\d+/,
  );
  expect(await page.locator('#processes').innerText()).toMatch(/gateway\s+http:\S+\/metrics\s+up/);
  const figures = JSON.parse((await fetchIn(page, '/queues?format=json')).text);
  expect(figures).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        process: 'cluster',
        metric: 'mtg_queue_jobs',
        labels: expect.objectContaining({ state: 'queued' }),
      }),
      expect.objectContaining({ process: 'gateway', metric: 'state', value: 'up' }),
    ]),
  );
  await context.close();
});

test('an operator sees the worker pools, their queues and workers, and the queue nobody serves', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'operator', { sub: 'olga', tenant: 'acme' });
  await page.goto(`${consoleApp.url}/queues`);
  const reports = await page.locator('section.pool[data-pool="generate_report"]').innerText();
  expect(reports).toContain('2 live workers');
  expect(reports).toMatch(/reports-1\s+127\.0\.0\.1:\d+/);
  expect(reports).toMatch(/reports-2\s+127\.0\.0\.1:\d+/);
  expect(reports).not.toContain('bulk-1');
  // Its queue, the slots from each worker's metrics, no breaker has opened.
  expect(reports).toMatch(/generate_report\s+tool\.generate_report\.\w+\s+\d+\s+\d+\s+\d+\s+\d+/);
  expect(reports).toMatch(/\d+\/\d+\s+all closed/);
  // The Processes table reads the same workers' breakers the same way.
  // (Each table's last column is its circuit breakers.)
  const circuitsIn = (selector: string, row: string) =>
    page
      .locator(`${selector} tbody tr`)
      .filter({ has: page.locator('td:first-child', { hasText: new RegExp(`^${row}$`) }) })
      .locator('td:last-child')
      .innerText();
  for (const worker of ['reports-1', 'reports-2', 'bulk-1']) {
    const inPool = await circuitsIn('#worker-pools', worker);
    expect(inPool).toBe('all closed');
    expect(await circuitsIn('#processes', worker)).toBe(inPool);
  }
  const bulk = await page.locator('section.pool[data-pool="bulk_update_records"]').innerText();
  expect(bulk).toContain('1 live worker');
  expect(bulk).toContain('bulk-1');
  expect(bulk).not.toContain('reports-');
  // The queue no live worker serves stands out, with the task waiting in it.
  const [waiting] = await sql(
    stack.db.url,
    `SELECT job_queue, status, lease_owner FROM app.tasks WHERE id = $1`,
    [unservedTask],
  );
  expect(waiting).toMatchObject({ status: 'working', lease_owner: null });
  // Its page and the task list say what app.tasks says: a queued task is working there too
  // (neither "open" nor "submitted").
  const taskPage = await context.newPage();
  await taskPage.goto(`${consoleApp.url}/tasks/${unservedTask}`);
  expect((await taskPage.locator('#task-status').innerText()).trim()).toBe(waiting.status);
  await taskPage.goto(`${consoleApp.url}/tasks?id=${unservedTask}`);
  expect(await taskPage.locator('span.status').allTextContents()).toEqual([waiting.status]);
  await taskPage.close();
  const unserved = await page.locator('#unserved-queues').innerText();
  expect(unserved).toContain('will not run');
  expect(unserved).not.toMatch(/generate_report|bulk_update_records/);
  expect(unserved).toContain(`provision_test_environment\t${waiting.job_queue}\t1\t0\t0\t0`);
  expect(await page.locator('#worker-pools').innerText()).not.toContain(
    'provision_test_environment',
  );

  const rows = JSON.parse((await fetchIn(page, '/queues/pools?format=json')).text);
  expect(rows).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        pool: 'generate_report',
        tool: 'generate_report',
        served: true,
        workers: 'reports-1 reports-2',
      }),
      expect.objectContaining({ pool: 'bulk_update_records', served: true, workers: 'bulk-1' }),
      expect.objectContaining({
        pool: '',
        queue: waiting.job_queue,
        served: false,
        queued: 1,
        workers: '',
      }),
    ]),
  );
  // The database's count, not a number of the page's own.
  const [open] = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM app.tasks WHERE job_queue = $1 AND status = 'working'
        AND lease_owner IS NULL AND started_at IS NULL`,
    [waiting.job_queue],
  );
  expect(rows.find((r: { queue: string }) => r.queue === waiting.job_queue).queued).toBe(open.n);
  const csv = await fetchIn(page, '/queues/pools?format=csv');
  expect(csv.type).toContain('text/csv');
  expect(csv.text.split('\r\n')[0]).toBe(
    'pool,queue,tool,served,queued,running,retry,paused,workers,circuits',
  );
  expect((await fetchIn(page, '/queues/pools?format=xml')).status).toBe(400);
  await shot(page, 'queues');
  // An auditor does not get the pools either (cluster-wide figures).
  const auditor = await logIn(await newContext(browser), consoleApp.url, 'auditor', {
    sub: 'ada',
    tenant: 'acme',
  });
  expect((await fetchIn(auditor, '/queues/pools?format=json')).status).toBe(403);
  await auditor.context().close();
  await context.close();
});

test('on a narrow window, timestamps and client names stay on one line', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'operator', { sub: 'olga', tenant: 'acme' });
  await page.setViewportSize({ width: 720, height: 900 });
  /** Cells of timestamps and names whose text runs over more than one line. */
  // (A string: the test's TypeScript has no DOM types.) A text's line count is the number of
  // distinct tops among its client rects.
  const wrapped = () =>
    page.evaluate<{ checked: number; wrapped: string[] }>(`(() => {
      const lines = (node) => {
        const range = document.createRange();
        range.selectNodeContents(node);
        return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
      };
      const cells = [...document.querySelectorAll('td time, td.name')].filter((el) =>
        el.textContent.trim(),
      );
      return {
        checked: cells.length,
        wrapped: cells.filter((el) => lines(el) > 1).map((el) => el.textContent),
      };
    })()`);
  for (const path of ['/denials?since=30d', '/revocations', `/tasks/${reportTask}`, '/queues']) {
    await page.goto(`${consoleApp.url}${path}`);
    const found = await wrapped();
    expect({ path, checked: found.checked > 0, wrapped: found.wrapped }).toEqual({
      path,
      checked: true,
      wrapped: [],
    });
  }
  await context.close();
});

test("an auditor downloads the tenant's month from the console, and it verifies offline", async () => {
  // Sign the head first: the month's last events came after the first checkpoint.
  expect((await checkpointScript([], { DATABASE_URL: stack.db.url, DATA_DIR: dataDir })).code).toBe(
    0,
  );
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'auditor', { sub: 'ada', tenant: 'acme' });
  await page.goto(`${consoleApp.url}/evidence`);
  // The month under way is offered: nothing to pick for it.
  expect(await page.inputValue('input[name=month]')).toBe(new Date().toISOString().slice(0, 7));
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.click('#download-month'),
  ]);
  const file = path.join(dataDir, 'month.json');
  await download.saveAs(file);
  const verified = await verifyScript(
    ['--bundle', file, '--keys', path.join(dataDir, 'audit', 'jwks.json')],
    {
      DATA_DIR: path.join(dataDir, 'no-database'),
    },
  );
  expect(verified.stdout).toMatch(/verified: events 1\.\.\d+.*up to the checkpoint signed/);
  expect(verified.code).toBe(0);
  const selected = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE tenant = 'acme' AND occurred_at >= date_trunc('month', now())`,
  );
  expect(verified.stdout).toContain(`; ${selected[0].n} selected`);
  await context.close();
});
