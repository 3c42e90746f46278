#!/usr/bin/env bash
# Make a Docker engine reachable, idempotently: install docker.io when dockerd is absent, start
# dockerd in the background when `docker info` fails, and wait (bounded) until it answers.
# Safe to run again and again; does nothing when the engine already answers.
#
# Env: ARENA_DOCKER_WAIT_S (default 60)  how long to wait for the daemon to answer
#      ARENA_DOCKERD_LOG   (default /var/log/dockerd.log)
set -euo pipefail

wait_s="${ARENA_DOCKER_WAIT_S:-60}"
log="${ARENA_DOCKERD_LOG:-/var/log/dockerd.log}"

say() { echo "ensure_docker: $*" >&2; }
fail() { say "ERROR: $*"; exit 1; }

if docker info >/dev/null 2>&1; then
    say "engine already reachable"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || fail "dockerd is not installed and we are not root (uid $(id -u)); \
install docker.io as root (apt-get install -y docker.io) and run this again"
    say "dockerd not found; installing docker.io"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io \
        || fail "apt-get install docker.io failed; check the apt sources and network"
fi
command -v docker >/dev/null 2>&1 || fail "the docker CLI is missing after install; \
install docker.io (Debian) or docker-ce-cli"

if ! pgrep -x dockerd >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || fail "dockerd is not running and we are not root (uid $(id -u)); \
start it with 'sudo dockerd' or 'sudo systemctl start docker'"
    say "starting dockerd in the background (log: $log)"
    nohup dockerd >"$log" 2>&1 &
fi

for _ in $(seq 1 "$wait_s"); do
    if docker info >/dev/null 2>&1; then
        say "engine ready"
        exit 0
    fi
    sleep 1
done
fail "dockerd did not answer within ${wait_s}s; see the last lines of $log:
$(tail -n 20 "$log" 2>/dev/null || true)"
