#!/usr/bin/env bash
# The demo command: set up, make a Docker sandbox available when this machine can run one, then
# start the embedded platform (server on SQLite + worker + sample competition + two baselines).
# Extra arguments go to `arena demo` (e.g. --port 8080, --exit-when-done).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${ARENA_DEMO_SANDBOX:-1}" = 1 ]; then
  if bash scripts/ensure_docker.sh && bash scripts/build_sandbox_image.sh cpu; then
    echo "demo: Docker sandbox ready" >&2
  else
    echo "demo: no Docker sandbox on this machine; the demo will run submissions UNSANDBOXED" >&2
  fi
fi
exec .venv/bin/arena demo "$@"
