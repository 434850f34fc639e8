# One image for every process of the stack; docker-compose.yml and deploy/kubernetes pick the
# command per service. Node 24 strips TypeScript types natively, so the sources run as they
# are: no build step. The base is pinned to the Node release the repository tests with (the
# `node` devDependency); pin its digest too in your own registry.
FROM node:24.21.0-slim AS base

WORKDIR /app
# Workspace manifests and sources are needed by `npm ci` (it links the workspaces).
# .dockerignore keeps the local .data/, node_modules/, .env and tests out of the context.
COPY package.json package-lock.json ./
COPY packages ./packages
COPY apps ./apps
COPY scripts ./scripts

# The production image (default): runtime dependencies only. The dev-only packages —
# embedded-postgres (the launcher's local server), oidc-provider (the dev IdP), jest, swc,
# typescript — are devDependencies and stay out.
FROM base AS runtime
ENV NODE_ENV=production
RUN npm ci --omit=dev --no-audit --no-fund \
  && npm cache clean --force \
  && mkdir -p /app/.data \
  && chown node:node /app/.data
USER node
CMD ["node", "apps/gateway/src/main.ts"]

# The dev IdP (apps/idp) for the compose demo: everything, oidc-provider included. Never
# deployed to production (deploy/kubernetes has no IdP).
FROM base AS dev-idp
ENV NODE_ENV=production
RUN npm ci --no-audit --no-fund \
  && npm cache clean --force \
  && mkdir -p /app/.data \
  && chown node:node /app/.data
USER node
# The dev IdP keeps its signing keys here; compose mounts a volume on it.
VOLUME ["/app/.data"]
CMD ["node", "apps/idp/src/main.ts"]

# `docker build .` without --target builds the production image.
FROM runtime
