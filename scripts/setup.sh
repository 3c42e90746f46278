#!/usr/bin/env bash
# Creates .venv and installs the project with the platform and dev extras. Idempotent: a second
# call only reinstalls when pyproject.toml changed.
#
# The installs go through uv (from the package index, into the venv) when it can be had: it
# resolves and downloads in parallel (a fresh virtualenv
# on the shared 2-core machine at load 25-38: 248 s wall, 47 s CPU, against pip's 523 s and
# 55 s). It reads no pip configuration, so it is handed pip's own (find-links, extra index URLs,
# constraints, certificate) and picks the best version over every index, as pip does. Anything
# uv cannot do falls back to pip, as before; ARENA_SETUP_PIP=1 skips uv altogether.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.arena-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0

say() { echo "setup: $*" >&2; }

# torch first: 2.13.0 is a CPU build (a local wheel on our dev machines); elsewhere any torch >= 2.1 does.
with_pip() {  # called after ||, where set -e does not hold: each step chained
  .venv/bin/pip install -q --upgrade pip \
    && { .venv/bin/pip install -q 'torch==2.13.0' 2>/dev/null \
         || .venv/bin/pip install -q 'torch>=2.1'; } \
    && .venv/bin/pip install -q -e '.[platform,dev]'
}

with_uv() {
  [ "${ARENA_SETUP_PIP:-}" = 1 ] && return 1
  .venv/bin/pip install -q uv >/dev/null 2>&1 || { say "no uv from the index; installing with pip"; return 1; }
  # no --compile-bytecode: scripts/pyc_cache.py compiles after it, reusing earlier clones' bytecode
  local uv=(.venv/bin/uv pip install -q --python .venv/bin/python
            --index-strategy unsafe-best-match)
  # pip's configuration (files and PIP_* variables) as uv's options
  local key value item
  while IFS='=' read -r key value; do
    value=${value#\'}; value=${value%\'}
    case "${key#*.}" in
      find-links) for item in $value; do uv+=(--find-links "$item"); done ;;
      extra-index-url) for item in $value; do uv+=(--extra-index-url "$item"); done ;;
      index-url) uv+=(--index-url "$value") ;;
      constraint) for item in $value; do uv+=(--constraint "$item"); done ;;
      cert) export SSL_CERT_FILE="$value" ;;
    esac
  done < <(.venv/bin/pip config list 2>/dev/null)
  # the newest pip too, as pip's own path does (tests run `python -m pip wheel`)
  uv+=(--upgrade-package pip pip)
  "${uv[@]}" 'torch==2.13.0' -e '.[platform,dev]' 2>/dev/null \
    || "${uv[@]}" 'torch>=2.1' -e '.[platform,dev]' || { say "uv failed; installing with pip"; return 1; }
}

with_uv || with_pip
# The bytecode (our machines set PYTHONDONTWRITEBYTECODE: without the .pyc files every process
# the tests start would compile torch, fastapi, ... again), reused from this machine's earlier
# virtualenvs where uv linked the same files (a fresh clone: ~24 s of CPU saved).
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python scripts/pyc_cache.py "$site" \
  "${ARENA_PYC_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/metadl-arena/pyc}"
echo "$want" > "$stamp"
