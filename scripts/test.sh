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
# mypy (the packages of pyproject.toml's [tool.mypy]) keeps its cache outside the tree, so a fresh
# clone (CI) starts warm where the machine ran it before (1.4 s against 32 s of CPU without a
# cache; mypy checks each cached module by its source's hash when the path or mtime changed). It
# runs beside pytest's first minutes: where it has no cache (a fresh machine), the first files,
# waiting on containers and runs, leave it a core. Its output is printed when it ends, and a
# failure fails the command.
mypy_cache="${ARENA_MYPY_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/metadl-arena/mypy}"
mkdir -p "$mypy_cache"
mypy_log=$(mktemp)
mypy_rc=$(mktemp)
trap 'rm -f "$mypy_log" "$mypy_rc"' EXIT
( set +e; .venv/bin/mypy --cache-dir "$mypy_cache" >"$mypy_log" 2>&1; echo $? >"$mypy_rc"
  echo; echo "mypy (beside pytest), exit status $(cat "$mypy_rc"):"; cat "$mypy_log" ) &
mypy_pid=$!
# Three xdist workers by default on 2 cores or more (one more than the cores on 1), each with its
# own Redis database and queue; tests/conftest.py schedules the longest files first. More workers
# than cores, because most of the suite's time waits on real runs, containers, leases and
# restarts, not on a core (docs/testing.md: on this 2-core machine 3 workers 982 s, 2 workers
# 1,197 s, both green). ARENA_TEST_WORKERS=N runs N workers; 0 (or `-n 0` among the arguments)
# runs in one process. The slowest 25, then the time per folder.
cores=$(nproc 2>/dev/null || echo 1)
workers="${ARENA_TEST_WORKERS:-$(( cores >= 2 ? 3 : 2 ))}"
pytest_rc=0
.venv/bin/python -m pytest -n "$workers" --durations=25 "$@" || pytest_rc=$?
wait "$mypy_pid" || true
if [ "$(cat "$mypy_rc")" != 0 ]; then
  echo "mypy failed (exit status $(cat "$mypy_rc"); its output above)" >&2
  exit $(( pytest_rc != 0 ? pytest_rc : 1 ))
fi
exit "$pytest_rc"
