#!/usr/bin/env bash
# Build a sandbox image offline, and reuse it when nothing changed: the image carries a label with
# a hash of the Dockerfile, the wheel list and the base image id; a matching image is kept, any
# change rebuilds. Wheels are downloaded on the host (containers reach no package index) into a
# cache outside the tracked tree, with the debootstrap tarball (docker/build_offline_base.sh).
#
# Usage: scripts/build_sandbox_image.sh [cpu|torchvision|gpu] [--force]
#   cpu          metadl-arena/sandbox:cpu          offline base + torch 2.13.0 CPU, numpy, pillow
#                                                   (what the tests use; ~1.5 GB)
#   torchvision  metadl-arena/sandbox:torchvision  offline base + torch 2.14.1 (with its CUDA
#                                                   libraries), torchvision 0.29.1, numpy, pillow:
#                                                   runs NeurIPS'22 zips (~6 GB image, ~20 GB free
#                                                   disk while building; the NeurIPS'22 e2e test)
#   gpu          metadl-arena/sandbox:gpu          on a CUDA base that already has torch
#                                                   (ARENA_SANDBOX_BASE, must be present locally)
# Env: ARENA_IMAGE_CACHE (cache folder), ARENA_PIP (pip command, default: the repo venv's pip),
#      ARENA_SANDBOX_BASE (gpu target's base image).
# Wheels are fetched once per requirement list (a stamp in the wheel folder); --force fetches
# them again and rebuilds.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=docker/lib.sh
. "$repo/docker/lib.sh"

target="${1:-cpu}"
force="${2:-}"
[ "$target" = "--force" ] && { target=cpu; force=--force; }
base="metadl-arena/base:bookworm"
# need_gb: free disk the build needs at its peak (wheels, build context, build stage, image).
case "$target" in
    cpu) requirements=(torch==2.13.0 numpy pillow); need_gb=5 ;;
    torchvision) requirements=(torch==2.14.1 torchvision==0.29.1 numpy pillow); need_gb=20 ;;
    gpu) requirements=(); need_gb=0
         base="${ARENA_SANDBOX_BASE:-pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime}" ;;
    *) arena_fail "unknown target '$target'; expected cpu, torchvision or gpu" ;;
esac
tag="metadl-arena/sandbox:$target"
cache="$(arena_cache_dir)"
wheels="$cache/wheels-$target"
dockerfile="$repo/docker/sandbox.Dockerfile"

docker info >/dev/null 2>&1 || arena_fail "no Docker engine answers; run scripts/ensure_docker.sh"
docker_root="$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || true)"

if [ "$target" = gpu ]; then
    docker image inspect "$base" >/dev/null 2>&1 || arena_fail "base image $base is not present; \
load it first (docker load -i ...) or set ARENA_SANDBOX_BASE to a local CUDA+torch image"
else
    "$repo/docker/build_offline_base.sh"
fi

mkdir -p "$wheels"
stamp="$wheels/.requirements"
if [ "${#requirements[@]}" -gt 0 ] && { [ "$force" = "--force" ] \
        || [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]}" ]; }; then
    [ "$target" = torchvision ] && arena_say "the torchvision image is large: ~3 GB of wheels \
to fetch, a ~6 GB image, ~${need_gb} GB free disk at the peak of its build"
    arena_check_free_disk "$need_gb" "$cache" "$docker_root"
    pip="${ARENA_PIP:-$repo/.venv/bin/pip}"
    [ -x "${pip%% *}" ] || pip="python3 -m pip"
    # Wheels must run on the base image: ask it for its CPython and glibc versions, and accept
    # every manylinux tag up to that glibc (pip does not widen an explicit --platform itself;
    # torch 2.14.1's CUDA libraries ship as manylinux_2_27/2_25/2_18 wheels).
    read -r py_version glibc_minor < <(docker run --rm --network none --entrypoint python3 \
        "$base" -c 'import os, sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}",
os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[1])') \
        || arena_fail "cannot run python3 in $base to read its Python and glibc versions"
    platforms=()
    for minor in $(seq "$glibc_minor" -1 17); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
    platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
        --platform manylinux1_x86_64 --platform any)
    log="$cache/pip-download-$target.log"
    arena_say "downloading wheels for ${requirements[*]} (CPython $py_version, glibc 2.$glibc_minor) into $wheels"
    rm -rf "$wheels.new"
    # One resolution per build; a stale wheel of another version would be installed too.
    if $pip download -q -d "$wheels.new" --only-binary=:all: --python-version "$py_version" \
        --implementation cp "${platforms[@]}" "${requirements[@]}" pip >"$log" 2>&1; then
        echo "${requirements[*]}" > "$wheels.new/.requirements"
        rm -rf "$wheels" && mv "$wheels.new" "$wheels"
    else
        rm -rf "$wheels.new"
        ls "$wheels"/*.whl >/dev/null 2>&1 || arena_fail "pip download of ${requirements[*]} for \
CPython $py_version on glibc 2.$glibc_minor (x86_64) failed and no wheels are cached in $wheels. \
pip said (full log: $log):
$(grep -v '^ *$' "$log" | tail -n 8)"
        arena_say "pip download failed (see $log); reusing the cached wheels in $wheels"
    fi
elif [ "${#requirements[@]}" -gt 0 ]; then
    arena_say "reusing the wheels in $wheels (${requirements[*]}; --force fetches them again)"
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
# The wheels are on disk by now: what the build still needs is the rest.
wheels_gb="$(du -sk "$wheels" | awk '{ print int($1 / 1048576) }')"
[ "$need_gb" -gt 0 ] && arena_check_free_disk "$((need_gb - wheels_gb))" "$docker_root"
[ "$target" = torchvision ] && arena_say "building $tag: a ~6 GB image (torch with its CUDA \
libraries); 10-30 min on a few cores"
arena_say "building $tag on $base (recipe $recipe)"
DOCKER_BUILDKIT=0 docker build --build-arg "BASE_IMAGE=$base" \
    --label "org.metadl-arena.recipe=$recipe" -t "$tag" "$context" >"$cache/build-$target.log" 2>&1 \
    || arena_fail "docker build of $tag failed; see $cache/build-$target.log"
# The image this build replaced is now dangling and carries our label; so does the wheels stage
# (its installed copy is in the image: keeping it would hold ~2x the image's size for the
# torchvision target). The final stage's own layer cache does not carry the label.
docker image prune -f --filter "label=org.metadl-arena.recipe" >/dev/null 2>&1 || true
docker image prune -f --filter "label=org.metadl-arena.stage=wheels" >/dev/null 2>&1 || true
arena_say "$tag ready"
