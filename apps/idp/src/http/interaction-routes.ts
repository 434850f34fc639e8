import express, { type Request, type Response } from 'express';
import type Provider from 'oidc-provider';
import type { Logger } from '@mtg/log';
import { encodeAccountId, isIdentifier } from '../account-id.ts';
import type { UserStore } from '../user-store.ts';
import { renderLoginPage } from './pages.ts';

/**
 * The login interaction: a form asking for a user name and a tenant, then consent granted
 * automatically for what the client asked (a dev IdP has no one to ask).
 */
export function interactionRoutes(deps: {
  provider: Provider;
  users: UserStore;
  logger: Logger;
}): express.Router {
  const { provider, users, logger } = deps;
  const router = express.Router();
  router.use((_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    next();
  });

  router.get('/interaction/:uid', async (req: Request, res: Response) => {
    const interaction = await provider.interactionDetails(req, res);
    const { prompt, params } = interaction;
    if (prompt.name === 'login') {
      res.type('html').send(
        renderLoginPage({
          uid: interaction.uid,
          clientId: String(params.client_id),
          scope: typeof params.scope === 'string' ? params.scope : undefined,
        }),
      );
      return;
    }
    if (prompt.name === 'consent') {
      await grantConsent(provider, req, res);
      return;
    }
    await provider.interactionFinished(
      req,
      res,
      { error: 'access_denied', error_description: `unsupported prompt ${prompt.name}` },
      { mergeWithLastSubmission: false },
    );
  });

  router.post(
    '/interaction/:uid/login',
    express.urlencoded({ extended: false }),
    async (req: Request, res: Response) => {
      const interaction = await provider.interactionDetails(req, res);
      const body = (req.body ?? {}) as Record<string, unknown>;
      const username = typeof body.username === 'string' ? body.username.trim() : '';
      const tenant = typeof body.tenant === 'string' ? body.tenant.trim() : '';
      const again = (status: number, error: string) =>
        res
          .status(status)
          .type('html')
          .send(
            renderLoginPage({
              uid: interaction.uid,
              clientId: String(interaction.params.client_id),
              scope:
                typeof interaction.params.scope === 'string' ? interaction.params.scope : undefined,
              username,
              tenant,
              error,
            }),
          );
      if (!isIdentifier(username) || !isIdentifier(tenant)) {
        again(400, 'User name and tenant: 1-128 letters, digits and . _ @ + - characters.');
        return;
      }
      const user = await users.ensure({ tenant, sub: username });
      if (user.disabled) {
        logger.info('login refused: user disabled', { sub: username, tenant });
        again(403, `User ${username} in tenant ${tenant} is disabled.`);
        return;
      }
      logger.info('login', { sub: username, tenant, client: interaction.params.client_id });
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: encodeAccountId({ tenant, sub: username }) } },
        { mergeWithLastSubmission: false },
      );
    },
  );

  router.get('/interaction/:uid/abort', async (req: Request, res: Response) => {
    await provider.interactionFinished(
      req,
      res,
      { error: 'access_denied', error_description: 'the user cancelled the login' },
      { mergeWithLastSubmission: false },
    );
  });

  return router;
}

/** Grants whatever the authorization request is missing: scopes, claims, resource scopes. */
async function grantConsent(provider: Provider, req: Request, res: Response): Promise<void> {
  const interaction = await provider.interactionDetails(req, res);
  const { prompt, params, session } = interaction;
  if (!session) throw new Error('consent prompt without a session');
  const details = prompt.details as {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
  };
  const grant = interaction.grantId
    ? await provider.Grant.find(interaction.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: String(params.client_id) });
  if (!grant) throw new Error('grant of the interaction not found');
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(details.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(
    req,
    res,
    { consent: interaction.grantId ? {} : { grantId } },
    { mergeWithLastSubmission: true },
  );
}
