import { Router } from 'express';
import { metadataUrlsFor, protectedResourceMetadata } from '@mtg/identity';

/** RFC 9728 protected resource metadata at the path-specific and root well-known URLs. */
export function resourceMetadataRoutes(options: {
  resource: string;
  issuer: string;
  scopes: string[];
}): Router {
  const router = Router();
  const document = protectedResourceMetadata({
    resource: options.resource,
    authorizationServers: [options.issuer],
    scopesSupported: options.scopes,
    resourceName: 'MCP task gateway',
  });
  for (const href of metadataUrlsFor(options.resource)) {
    router.get(new URL(href).pathname, (_req, res) => {
      res.set('Cache-Control', 'public, max-age=300').json(document);
    });
  }
  return router;
}
