# One image for every process of the stack; docker-compose.yml picks the command per service.
# Node 24 strips TypeScript types natively, so the sources run as they are: no build step.
FROM node:24-slim

ENV NODE_ENV=production
WORKDIR /app

# Workspace manifests and sources first are needed by `npm ci` (it links the workspaces).
# Copy only what the processes run: never the local .data/ or node_modules/.
COPY package.json package-lock.json ./
COPY packages ./packages
COPY apps ./apps
COPY db ./db
COPY scripts ./scripts

# Dev dependencies (jest, swc, typescript, the pinned `node` package) stay out of the image:
# the base image provides Node 24.
RUN npm ci --omit=dev --no-audit --no-fund \
  && npm cache clean --force \
  && mkdir -p /app/.data \
  && chown node:node /app/.data

USER node
# The dev IdP keeps its signing keys here; compose mounts a volume on it.
VOLUME ["/app/.data"]

CMD ["node", "apps/gateway/src/main.ts"]
