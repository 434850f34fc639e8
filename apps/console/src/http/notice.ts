import type { Response } from 'express';
import { sessionOf } from './guards.ts';
import { html, type SafeHtml } from './html.ts';
import type { Flash, SessionStore } from './session-store.ts';

/**
 * After an action: keep its outcome in the session for the page the browser is sent to. The
 * outcome never travels in the URL, where anyone could write a link with an "official" notice.
 */
export async function flashNotice(
  sessions: SessionStore,
  res: Response,
  flash: Flash,
): Promise<void> {
  await sessions.setFlash(sessionOf(res), flash);
}

/** The notice the console kept for this page (shown once), or nothing. */
export async function takeNotice(sessions: SessionStore, res: Response): Promise<SafeHtml | ''> {
  const flash = await sessions.takeFlash(sessionOf(res));
  if (!flash) return '';
  return html`<p class="${flash.kind}" id="action-result">${flash.text}</p>`;
}
