import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it): never a downloaded one. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Root in CI containers has no user namespace sandbox.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

/** A fresh context (its own cookies) at a small, fixed size, so screenshots stay small. */
export function newContext(browser: Browser): Promise<BrowserContext> {
  return browser.newContext({ viewport: { width: 1100, height: 680 }, acceptDownloads: true });
}

/**
 * Logs in through the console's login page and the dev IdP's form, as a person would.
 * Returns the page on the console's task list.
 */
export async function logIn(
  context: BrowserContext,
  consoleUrl: string,
  role: 'auditor' | 'operator' | 'user' | 'approver',
  user: { sub: string; tenant: string },
): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${consoleUrl}/login`);
  await page.click(`#login-${role}`);
  await page.fill('#username', user.sub);
  await page.fill('#tenant', user.tenant);
  await page.locator('form button, form input[type=submit]').first().click();
  await page.waitForURL(`${consoleUrl}/tasks`);
  return page;
}

const DOCS_DIR = fileURLToPath(new URL('../../docs/console', import.meta.url));

/**
 * Where screenshots go: docs/console/ when CONSOLE_SCREENSHOTS=1 (to refresh the docs),
 * otherwise a temporary directory, so a test run leaves the work tree as it was.
 */
export async function screenshotDir(): Promise<string> {
  const dir =
    process.env.CONSOLE_SCREENSHOTS === '1'
      ? DOCS_DIR
      : path.join(os.tmpdir(), 'mtg-console-screenshots');
  await mkdir(dir, { recursive: true });
  return dir;
}
