#!/usr/bin/env bash
# The test command: set up, start the services the tests need, lint, run every test tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
