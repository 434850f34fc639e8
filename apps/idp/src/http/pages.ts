// Minimal HTML for the person in front of the dev IdP. No scripts, no external assets.

const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const layout = (title: string, body: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 26rem; margin: 4rem auto; padding: 0 1rem; }
label { display: block; margin: 1rem 0 .25rem; }
input { width: 100%; padding: .5rem; box-sizing: border-box; }
button { margin-top: 1.5rem; padding: .5rem 1rem; }
.error { color: #a00; }
.note { color: #666; font-size: .9rem; }
</style>
</head>
<body>
${body}
</body>
</html>
`;

export interface LoginPage {
  uid: string;
  clientId: string;
  scope?: string;
  username?: string;
  tenant?: string;
  error?: string;
}

/** The login form: any user name in any tenant is accepted, unless it is disabled. */
export function renderLoginPage(page: LoginPage): string {
  const action = `/interaction/${encodeURIComponent(page.uid)}/login`;
  return layout(
    'Sign in — dev IdP',
    `<h1>Sign in</h1>
<p class="note">Development identity provider: any user name and tenant are accepted,
no password. Client <code>${escapeHtml(page.clientId)}</code> asks for
<code>${escapeHtml(page.scope ?? '')}</code>.</p>
${page.error ? `<p class="error" role="alert">${escapeHtml(page.error)}</p>` : ''}
<form method="post" action="${escapeHtml(action)}" autocomplete="off">
<label for="username">User name</label>
<input id="username" name="username" required autofocus value="${escapeHtml(page.username ?? '')}">
<label for="tenant">Tenant</label>
<input id="tenant" name="tenant" required value="${escapeHtml(page.tenant ?? '')}">
<button type="submit">Sign in</button>
</form>
<p><a href="/interaction/${encodeURIComponent(page.uid)}/abort">Cancel</a></p>`,
  );
}

export function renderErrorPage(out: object): string {
  const rows = Object.entries(out)
    .map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(String(v))}</dd>`)
    .join('\n');
  return layout('Error — dev IdP', `<h1>Something went wrong</h1>\n<dl>\n${rows}\n</dl>`);
}
