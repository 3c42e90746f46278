#!/usr/bin/env bash
# The test command: set up, start the services the tests need, lint, type-check, run every test
# tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
# The tests' Postgres (scripts/test_postgres.sh): its admin URL, and initdb/pg_ctl on PATH for
# the suites that start private clusters.
set -a; . .arena/test-services.env; set +a
export PATH="$ARENA_TEST_PG_BIN:$PATH"
.venv/bin/ruff check .
# The packages of pyproject.toml's [tool.mypy], incrementally (.mypy_cache: ~2 s warm).
.venv/bin/mypy
# Two xdist workers (this 2-core machine; fewer where there are fewer cores), each with its own
# Redis database and queue; tests/conftest.py schedules the longest files first. `-n 0` (or
# ARENA_TEST_WORKERS=0) runs in one process. The slowest 25, then the time per folder.
.venv/bin/python -m pytest -n "${ARENA_TEST_WORKERS:-auto}" --maxprocesses 2 --durations=25 "$@"
