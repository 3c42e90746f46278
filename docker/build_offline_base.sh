#!/usr/bin/env bash
# Build the offline base image (Debian bookworm minbase + python3) without any registry:
# debootstrap a root filesystem from the host's apt mirror, tar it, and `docker import` it.
# The tarball is cached, and the image is reused when present, so reruns cost nothing.
# Installs debootstrap when missing (Debian/Ubuntu hosts, as root).
#
# Usage: docker/build_offline_base.sh [--force]
# Env:   ARENA_BASE_IMAGE  tag to produce     (default metadl-arena/base:bookworm)
#        ARENA_IMAGE_CACHE cache folder        (default /var/cache/metadl-arena, else .arena/image-cache)
#        ARENA_DEBIAN_MIRROR                   (default: the first Debian URI in the apt sources)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=docker/lib.sh
. "$here/lib.sh"

tag="${ARENA_BASE_IMAGE:-metadl-arena/base:bookworm}"
force="${1:-}"
cache="$(arena_cache_dir)"
tarball="$cache/bookworm-minbase-python3.tar"

if [ "$force" != "--force" ] && docker image inspect "$tag" >/dev/null 2>&1; then
    arena_say "base image $tag already present (use --force to rebuild)"
    exit 0
fi

if [ "$force" = "--force" ] || [ ! -s "$tarball" ]; then
    [ "$(id -u)" = 0 ] || arena_fail "debootstrap needs root (uid is $(id -u)); rerun as root"
    if ! command -v debootstrap >/dev/null; then
        arena_say "debootstrap not found; installing it"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap \
            >/dev/null || arena_fail "apt-get install debootstrap failed; check the apt sources"
    fi
    mirror="${ARENA_DEBIAN_MIRROR:-$(arena_debian_mirror)}"
    rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
    trap 'rm -rf "$rootfs"' EXIT
    arena_say "debootstrap bookworm minbase from $mirror (about a minute)"
    debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" "$mirror" \
        >"$cache/debootstrap.log" 2>&1 \
        || arena_fail "debootstrap failed; see $cache/debootstrap.log (mirror $mirror)"
    # Nothing of the build host's apt lists, caches or logs belongs in the image.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache
    tar -C "$rootfs" --numeric-owner -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
    trap - EXIT
fi

arena_say "importing $tarball as $tag"
docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$tarball" "$tag" >/dev/null
arena_say "base image $tag ready"
