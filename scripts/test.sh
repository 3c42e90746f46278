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
# Three xdist workers by default on 2 cores or more (one more than the cores on 1), each with its
# own Redis database and queue; tests/conftest.py schedules the longest files first. More workers
# than cores, because most of the suite's time waits on real runs, containers, leases and
# restarts, not on a core (docs/testing.md: on this 2-core machine 3 workers 982 s, 2 workers
# 1,197 s, both green). ARENA_TEST_WORKERS=N runs N workers; 0 (or `-n 0` among the arguments)
# runs in one process. The slowest 25, then the time per folder.
cores=$(nproc 2>/dev/null || echo 1)
workers="${ARENA_TEST_WORKERS:-$(( cores >= 2 ? 3 : 2 ))}"
.venv/bin/python -m pytest -n "$workers" --durations=25 "$@"
