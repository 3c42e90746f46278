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
# Two xdist workers by default (this 2-core machine; fewer where there are fewer cores), each with
# its own Redis database and queue; tests/conftest.py schedules the longest files first.
# ARENA_TEST_WORKERS=N runs N workers, more than the cores too (most of the suite's time waits on
# real runs, containers, leases and restarts, not on a core: docs/testing.md); 0 (or `-n 0`
# among the arguments) runs in one process. The cap of 2 applies to `auto` only: under
# `-n 3 --maxprocesses 2` xdist starts 2. The slowest 25, then the time per folder.
workers="${ARENA_TEST_WORKERS:-auto}"
cap=()
if [ "$workers" = auto ]; then cap=(--maxprocesses 2); fi
.venv/bin/python -m pytest -n "$workers" ${cap[@]+"${cap[@]}"} --durations=25 "$@"
