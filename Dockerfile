# One image for every process of the stack; docker-compose.yml and deploy/kubernetes pick the
# `mcp-task-gateway <command>` per service. The image is built the way a team consumes the
# product: the packages are built (tsc) and packed, then installed as a team installs them, so
# the runtime runs the published JavaScript, not this repository's sources. The base is pinned
# to the Node release the repository tests with (the `node` devDependency); pin its digest too
# in your own registry.
#
# A team's own tools go in without rebuilding this repository (docs/packaging.md):
#   FROM mcp-task-gateway:0.2.0
#   COPY my-tools-0.1.0.tgz /tmp/
#   RUN npm install --omit=dev --no-audit --no-fund /tmp/my-tools-0.1.0.tgz
#   ENV TOOL_PACKS=my-tools
FROM node:24.21.0-slim AS packages
WORKDIR /src
# .dockerignore keeps the local .data/, node_modules/, .env and tests out of the context.
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY packages ./packages
COPY apps ./apps
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund && node scripts/pack.ts --out /tarballs

FROM node:24.21.0-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY deploy/container/install-runtime.sh /usr/local/bin/install-runtime
COPY --from=packages /tarballs /tarballs
# The tarballs stay: a team's `npm install` of its pack in /app resolves against them.
RUN install-runtime /tarballs /app \
  && mkdir -p /app/.data \
  && chown node:node /app/.data
ENV PATH=/app/node_modules/.bin:$PATH
USER node
CMD ["mcp-task-gateway", "gateway"]

# The dev IdP (apps/idp) for the compose demo. Never deployed to production (deploy/kubernetes
# has no IdP).
FROM runtime AS dev-idp
# The dev IdP keeps its signing keys here; compose mounts a volume on it.
VOLUME ["/app/.data"]
CMD ["mcp-task-gateway", "idp"]

# `docker build .` without --target builds the production image.
FROM runtime
