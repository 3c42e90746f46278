#!/usr/bin/env bash
# Build a sandbox image offline, and reuse it when nothing changed: the image carries a label with
# a hash of the Dockerfile, the wheel list and the base image id; a matching image is kept, any
# change rebuilds. Wheels are downloaded on the host (containers reach no package index) into a
# cache outside the tracked tree, with the debootstrap tarball (docker/build_offline_base.sh).
#
# Usage: scripts/build_sandbox_image.sh [cpu|torchvision|gpu] [--force]
#   cpu          metadl-arena/sandbox:cpu          offline base + torch 2.13.0 CPU, numpy, pillow
#                                                   (what the tests use; ~1.5 GB)
#   torchvision  metadl-arena/sandbox:torchvision  offline base + torch 2.14.1, torchvision 0.29.1,
#                                                   numpy, pillow (~5.5 GB; not needed by tests)
#   gpu          metadl-arena/sandbox:gpu          on a CUDA base that already has torch
#                                                   (ARENA_SANDBOX_BASE, must be present locally)
# Env: ARENA_IMAGE_CACHE (cache folder), ARENA_PIP (pip command, default: the repo venv's pip),
#      ARENA_SANDBOX_BASE (gpu target's base image).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=docker/lib.sh
. "$repo/docker/lib.sh"

target="${1:-cpu}"
force="${2:-}"
[ "$target" = "--force" ] && { target=cpu; force=--force; }
base="metadl-arena/base:bookworm"
case "$target" in
    cpu) requirements=(torch==2.13.0 numpy pillow) ;;
    torchvision) requirements=(torch==2.14.1 torchvision==0.29.1 numpy pillow) ;;
    gpu) requirements=(); base="${ARENA_SANDBOX_BASE:-pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime}" ;;
    *) arena_fail "unknown target '$target'; expected cpu, torchvision or gpu" ;;
esac
tag="metadl-arena/sandbox:$target"
cache="$(arena_cache_dir)"
wheels="$cache/wheels-$target"
dockerfile="$repo/docker/sandbox.Dockerfile"

docker info >/dev/null 2>&1 || arena_fail "no Docker engine answers; run scripts/ensure_docker.sh"

if [ "$target" = gpu ]; then
    docker image inspect "$base" >/dev/null 2>&1 || arena_fail "base image $base is not present; \
load it first (docker load -i ...) or set ARENA_SANDBOX_BASE to a local CUDA+torch image"
else
    "$repo/docker/build_offline_base.sh"
fi

mkdir -p "$wheels"
if [ "${#requirements[@]}" -gt 0 ]; then
    pip="${ARENA_PIP:-$repo/.venv/bin/pip}"
    [ -x "${pip%% *}" ] || pip="python3 -m pip"
    arena_say "downloading wheels for ${requirements[*]} into $wheels"
    # One resolution per build; a stale wheel of another version would be installed too.
    if $pip download -q -d "$wheels.new" --only-binary=:all: --python-version 3.11 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any "${requirements[@]}" pip >/dev/null 2>&1; then
        rm -rf "$wheels" && mv "$wheels.new" "$wheels"
    else
        rm -rf "$wheels.new"
        ls "$wheels"/*.whl >/dev/null 2>&1 || arena_fail "pip download of ${requirements[*]} \
failed and no cached wheels exist in $wheels; check the package index (pip config list)"
        arena_say "pip download failed; reusing the cached wheels in $wheels"
    fi
fi

base_id="$(docker image inspect --format '{{.Id}}' "$base")"
recipe="$( { cat "$dockerfile"; echo "$target $base_id"; ls "$wheels"; } | sha256sum | cut -c1-16)"
current="$(docker image inspect --format '{{ index .Config.Labels "org.metadl-arena.recipe" }}' \
    "$tag" 2>/dev/null || true)"
if [ "$force" != "--force" ] && [ "$current" = "$recipe" ]; then
    arena_say "$tag is up to date (recipe $recipe)"
    exit 0
fi

context="$(mktemp -d "$cache/context.XXXXXX")"
trap 'rm -rf "$context"' EXIT
cp "$dockerfile" "$context/Dockerfile"
mkdir "$context/wheels"
# Hard links when the cache shares the filesystem: no 200 MB copies.
ls "$wheels"/*.whl >/dev/null 2>&1 && { ln "$wheels"/*.whl "$context/wheels/" 2>/dev/null \
    || cp "$wheels"/*.whl "$context/wheels/"; }
arena_say "building $tag on $base (recipe $recipe)"
DOCKER_BUILDKIT=0 docker build --build-arg "BASE_IMAGE=$base" \
    --label "org.metadl-arena.recipe=$recipe" -t "$tag" "$context" >"$cache/build-$target.log" 2>&1 \
    || arena_fail "docker build of $tag failed; see $cache/build-$target.log"
# The image this build replaced is now dangling; it carries our label, the stage cache does not.
docker image prune -f --filter "label=org.metadl-arena.recipe" >/dev/null 2>&1 || true
arena_say "$tag ready"
