#!/usr/bin/env bash
# Makes sure the services the tests talk to are up: PostgreSQL, Redis, the Docker engine with the
# offline sandbox image, and Debian's Chromium for browser tests. Installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v pg_ctlcluster >/dev/null; then apt_install postgresql; fi
if ! pg_isready -h 127.0.0.1 -q; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
fi
for _ in $(seq 30); do pg_isready -h 127.0.0.1 -q && break; sleep 1; done
pg_isready -h 127.0.0.1 -q || { echo "PostgreSQL did not start on 127.0.0.1:5432" >&2; exit 1; }

if ! command -v redis-server >/dev/null; then apt_install redis-server; fi
if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
for _ in $(seq 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done

if ! command -v chromium >/dev/null; then apt_install chromium; fi
if ! command -v docker-compose >/dev/null; then apt_install docker-compose; fi

bash scripts/ensure_docker.sh
bash scripts/build_sandbox_image.sh
