#!/bin/sh
# The runtime image's install, also run by the tests outside a container engine:
#   install-runtime.sh <tarball-dir> <app-dir> [more packages: a team's pack tarball, names …]
# Installs the product's packages from the tarballs `npm run pack` made into <app-dir>, whose
# node_modules/.bin then holds `mcp-task-gateway`; no devDependencies, no optional ones. From a
# registry, `npm install --omit=optional @mtg/cli` leaves the development-only packages out (the
# dev IdP, the embedded PostgreSQL, the demo pack); from tarballs npm must be handed them to
# resolve the CLI's optional dependencies, so their code is there, but not the embedded
# PostgreSQL's binaries (optional dependencies of embedded-postgres). The test harness is
# left out.
set -eu
tarballs=$(cd "$1" && pwd)
app=$2
shift 2
mkdir -p "$app"
cd "$app"
if [ ! -f package.json ]; then
  printf '{ "name": "mcp-task-gateway-runtime", "private": true, "type": "module" }\n' >package.json
fi
product=$(ls "$tarballs"/*.tgz | grep -v -e '/mtg-tool-harness-')
# shellcheck disable=SC2086 # one argument per tarball
npm install --omit=dev --omit=optional --no-audit --no-fund $product "$@"
npm cache clean --force 2>/dev/null || true
