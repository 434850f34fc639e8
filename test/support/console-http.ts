// A person at the console without a browser: a cookie jar per origin, redirects followed by
// hand, the dev IdP's login form posted as the browser would. For tests of what the console
// answers over HTTP; the browser test covers what it looks like.

/** The cookies of one person: name → value, per host:port. */
export class CookieJar {
  private readonly byOrigin = new Map<string, Map<string, string>>();

  header(url: string): string {
    const jar = this.byOrigin.get(new URL(url).host);
    return jar ? [...jar].map(([k, v]) => `${k}=${v}`).join('; ') : '';
  }

  take(url: string, response: Response): void {
    const host = new URL(url).host;
    const jar = this.byOrigin.get(host) ?? new Map<string, string>();
    this.byOrigin.set(host, jar);
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attrs.some(
        (a) => /^\s*max-age=0\s*$/i.test(a) || /expires=thu, 01 jan 1970/i.test(a),
      );
      if (expired || value === '') jar.delete(name);
      else jar.set(name, value);
    }
  }

  get(url: string, name: string): string | undefined {
    return this.byOrigin.get(new URL(url).host)?.get(name);
  }

  set(url: string, name: string, value: string): void {
    const host = new URL(url).host;
    const jar = this.byOrigin.get(host) ?? new Map<string, string>();
    this.byOrigin.set(host, jar);
    jar.set(name, value);
  }
}

export interface Answer {
  status: number;
  url: string;
  location: string | null;
  text: string;
}

/** One request with the jar's cookies, no redirect followed. */
export async function send(
  jar: CookieJar,
  url: string,
  init: { method?: string; form?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { cookie: jar.header(url) };
  if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
  const r = await fetch(url, {
    method: init.method ?? (init.form ? 'POST' : 'GET'),
    headers,
    redirect: 'manual',
    ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {}),
  });
  jar.take(url, r);
  return { status: r.status, url, location: r.headers.get('location'), text: await r.text() };
}

/** Follows redirects from `first` (at most 12), posting the dev IdP's login form on the way. */
export async function follow(
  jar: CookieJar,
  first: Answer,
  user: { sub: string; tenant: string },
): Promise<Answer> {
  let answer = first;
  for (let hop = 0; hop < 12; hop++) {
    if (answer.status >= 300 && answer.status < 400 && answer.location) {
      answer = await send(jar, new URL(answer.location, answer.url).href);
      continue;
    }
    const form = /<form method="post" action="([^"]*\/interaction\/[^"]*\/login)"/.exec(
      answer.text,
    );
    if (answer.status === 200 && form) {
      answer = await send(jar, new URL(form[1]!.replaceAll('&amp;', '&'), answer.url).href, {
        form: { username: user.sub, tenant: user.tenant },
      });
      continue;
    }
    return answer;
  }
  throw new Error(`login did not finish: last at ${answer.url} (${answer.status})`);
}

/**
 * Logs in at the console as `role`, through the dev IdP's form. Returns where it ended (the
 * task list, 200, when the login worked) and the jar with the session cookie.
 */
export async function logInOverHttp(
  consoleUrl: string,
  role: 'auditor' | 'operator' | 'user',
  user: { sub: string; tenant: string },
  jar = new CookieJar(),
): Promise<{ jar: CookieJar; answer: Answer }> {
  const answer = await follow(jar, await send(jar, `${consoleUrl}/login/start?role=${role}`), user);
  return { jar, answer };
}

/** The CSRF token of a console page's forms. */
export const csrfIn = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1];
