#!/usr/bin/env bash
# Makes sure the services the tests talk to are up: a PostgreSQL cluster of their own, Redis, the
# Docker engine with the offline sandbox images (cpu for most tests; torchvision, ~6 GB, for the
# NeurIPS'22 end-to-end test), and Debian's Chromium for browser tests. Installs what is missing;
# a second run finds everything up and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The tests' own throwaway cluster on a private port (never the machine's Postgres).
bash scripts/test_postgres.sh

if ! command -v redis-server >/dev/null; then apt_install redis-server; fi
# The across-hosts tests (tests/faults/test_pools_across_hosts.py): network namespaces, veth, drop rules.
if ! command -v ip >/dev/null || ! command -v iptables >/dev/null; then apt_install iproute2 iptables; fi
if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
for _ in $(seq 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done

if ! command -v chromium >/dev/null; then apt_install chromium; fi
if ! command -v docker-compose >/dev/null; then apt_install docker-compose; fi

bash scripts/ensure_docker.sh
bash scripts/build_sandbox_image.sh cpu
bash scripts/build_sandbox_image.sh torchvision
