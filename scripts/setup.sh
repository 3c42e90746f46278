#!/usr/bin/env bash
# Creates .venv and installs the project with the platform and dev extras. Idempotent: a second
# call only reinstalls when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp=.venv/.arena-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first: 2.13.0 is a CPU build (a local wheel on our dev machines); elsewhere any torch >= 2.1 does.
  .venv/bin/pip install -q 'torch==2.13.0' 2>/dev/null || .venv/bin/pip install -q 'torch>=2.1'
  .venv/bin/pip install -q -e '.[platform,dev]'
  echo "$want" > "$stamp"
fi
