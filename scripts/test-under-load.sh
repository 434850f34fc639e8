#!/usr/bin/env bash
# Runs `npm test -- <args>` beside busy loops that each keep a core busy, to show whether
# tests wait for events rather than wall time. LOAD sets how many loops (default 2).
#   scripts/test-under-load.sh packages/tasks/test/fold-denials.test.ts
#   LOAD=4 scripts/test-under-load.sh test/e2e/read-replica.test.ts
# The loops are this script's own children, stopped by their ids when the tests end (or the
# script is interrupted); the exit code is the tests'.
set -uo pipefail
cd "$(dirname "$0")/.."

load=${LOAD:-2}
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait "${pids[@]}" 2>/dev/null
}
trap stop EXIT
trap 'exit 130' INT TERM

for _ in $(seq 1 "$load"); do
  node -e 'for (;;) {}' &
  pids+=($!)
done
echo "test-under-load: ${load} busy loop(s) running (pids ${pids[*]})" >&2

npm test -- "$@"
