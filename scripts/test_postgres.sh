#!/usr/bin/env bash
# The tests' own PostgreSQL: a throwaway cluster (initdb, trust auth, fsync off) on a private port
# and socket folder, so the test command works on any machine — whether or not it runs a Postgres
# of its own, and whatever that one's authentication — and never touches that one's configuration.
# Idempotent: reuses the cluster when it answers, starts it when stopped, creates it when absent.
# Installs Debian's postgresql package when initdb is nowhere (root only).
#
# Writes the tests' admin URL and the server binaries' folder to .arena/test-services.env
# (ARENA_TEST_PG, ARENA_TEST_PG_BIN), which scripts/test.sh and tests/conftest.py read.
#
# Env: ARENA_TEST_PG_PORT (default 55432)
#      ARENA_TEST_PG_DIR  (default /tmp/metadl-arena-test-pg-<uid>; the postgres user must be
#                          able to reach it when we run as root)
set -euo pipefail
cd "$(dirname "$0")/.."

port="${ARENA_TEST_PG_PORT:-55432}"
dir="${ARENA_TEST_PG_DIR:-/tmp/metadl-arena-test-pg-$(id -u)}"
data="$dir/data"
env_file=.arena/test-services.env

say() { echo "test_postgres: $*" >&2; }
fail() { say "ERROR: $*"; exit 1; }

# Debian keeps initdb/pg_ctl under /usr/lib/postgresql/<version>/bin, off PATH; a folder counts
# only when it has every program used here.
find_bin() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV) \
            "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")"; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/pg_isready" ]; then
            echo "$dir"; return 0
        fi
    done
}

bin="$(find_bin)"
if [ -z "$bin" ]; then
    [ "$(id -u)" = 0 ] || fail "initdb is not installed and we are not root; install postgresql"
    say "initdb not found; installing postgresql"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
        || fail "apt-get install postgresql failed; check the apt sources and network"
    bin="$(find_bin)"
    [ -n "$bin" ] || fail "initdb is still missing after installing postgresql"
fi

# Postgres refuses to run as root: as root, the cluster belongs to the postgres user.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir "$dir" --shell /usr/sbin/nologin postgres
fi

url="postgresql://postgres@127.0.0.1:$port/postgres"
ready() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; }

if ready; then
    [ -f "$data/postmaster.pid" ] || fail "port $port already answers, but not with this cluster \
($data); set ARENA_TEST_PG_PORT to a free port"
    say "reusing the test cluster on port $port"
else
    mkdir -p "$dir/socket"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir" "$dir/socket"
    chmod 755 "$dir"
    if [ ! -f "$data/PG_VERSION" ]; then
        say "creating a throwaway cluster in $data (port $port)"
        rm -rf "$data"
        as_owner "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
            >"$dir/initdb.log" 2>&1 || fail "initdb failed; see $dir/initdb.log"
    fi
    # A cluster whose server died leaves a stale pid file; pg_ctl copes with it.
    as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start -o \
        "-p $port -k $dir/socket -c listen_addresses=127.0.0.1 -c fsync=off \
-c synchronous_commit=off -c full_page_writes=off -c max_connections=300" >/dev/null \
        || fail "the test cluster did not start; see $dir/server.log"
    ready || fail "the test cluster started but does not answer on 127.0.0.1:$port"
    say "test cluster ready on port $port"
fi

mkdir -p .arena
printf 'ARENA_TEST_PG=%s\nARENA_TEST_PG_BIN=%s\n' "$url" "$bin" > "$env_file"
