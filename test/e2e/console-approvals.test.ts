// Four-eyes approval in the console, in headless Chromium: a second person of the tenant
// sees the demo's large bulk update waiting, approves it (CSRF-protected form, decided by the
// gateway with their token), and the task goes on; the requester sees nothing to approve and
// a forged approval of their own task is refused; the timeline shows who approved.
import type { Browser } from 'playwright-core';
import { launchChromium, logIn, newContext } from '../support/browser.ts';
import { startConsole, type TestConsole } from '../support/console.ts';
import { pollUntil } from '../support/poll.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { extWire, jobToolsWire } from '../support/wires.ts';

let stack: Stack;
let consoleApp: TestConsole;
let browser: Browser;
let taskId: string;

beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '50', DEMO_APPROVAL_ABOVE: '100' } });
  consoleApp = await startConsole(stack);
  browser = await launchChromium();
  const alice = await stack.token('alice', 'acme');
  taskId = await extWire(stack.mcpUrl).start(alice, 'bulk_update_records', {
    collection: 'accounts',
    count: 400,
    patch: { role: 'admin' },
  });
  await pollUntil(
    () => jobToolsWire(stack.mcpUrl).get(alice, taskId),
    (a) => a.ok && a.value.inputFrom === 'approver',
  );
});
afterAll(async () => {
  await browser?.close();
  await consoleApp?.close();
  await stack?.close();
});

test('the requester has nothing to approve, and a forged approval of their own task is refused', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'approver', { sub: 'alice', tenant: 'acme' });
  await page.goto(`${consoleApp.url}/approvals`);
  await page.waitForSelector('#no-approvals');
  // The form the page would have shown, posted with alice's own CSRF token.
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const forged = await page.evaluate(
    async ([id, token]) => {
      const r = await fetch(`/approvals/${id}/approve`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `csrf=${encodeURIComponent(token!)}`,
      });
      return r.text();
    },
    [taskId, csrf],
  );
  expect(forged).toContain('Not done: You requested this task');
  // Without the CSRF token nothing is even asked.
  const noCsrf = await page.evaluate(async (id) => {
    const r = await fetch(`/approvals/${id}/approve`, { method: 'POST' });
    return r.status;
  }, taskId);
  expect(noCsrf).toBe(403);
  await context.close();
});

test('a second person approves in the console; the task writes and its timeline names the approver', async () => {
  const context = await newContext(browser);
  const page = await logIn(context, consoleApp.url, 'approver', { sub: 'bob', tenant: 'acme' });
  await page.click('nav a[href="/approvals"]');
  const row = page.locator(`tr.approval[data-task="${taskId}"]`);
  await row.waitFor();
  expect(await row.textContent()).toMatch(/bulk_update_records[\s\S]*alice[\s\S]*400 records/);
  await row.locator('button.approve').click();
  await page.waitForSelector(`text=Approved ${taskId}`);
  await context.close();

  const alice = await stack.token('alice', 'acme');
  await pollUntil(
    () => jobToolsWire(stack.mcpUrl).get(alice, taskId),
    (a) => a.ok && a.value.status === 'completed',
  );
  const owner = await newContext(browser);
  const timeline = await logIn(owner, consoleApp.url, 'user', { sub: 'alice', tenant: 'acme' });
  await timeline.goto(`${consoleApp.url}/tasks/${taskId}`);
  const text = (await timeline.textContent('main')) ?? '';
  expect(text).toContain('task.approval_requested');
  expect(text).toMatch(/task\.approved[\s\S]*bob/);
  await owner.close();
});
