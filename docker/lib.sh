# Shared helpers of the image build scripts (sourced, not run).

arena_say() { echo "arena-images: $*" >&2; }
arena_fail() { arena_say "ERROR: $*"; exit 1; }

# The cache for debootstrap tarballs and wheels: never inside the git tree's tracked files.
arena_cache_dir() {
    local repo dir
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    dir="${ARENA_IMAGE_CACHE:-}"
    if [ -z "$dir" ]; then
        if mkdir -p /var/cache/metadl-arena 2>/dev/null && [ -w /var/cache/metadl-arena ]; then
            dir=/var/cache/metadl-arena
        else
            dir="$repo/.arena/image-cache"
        fi
    fi
    mkdir -p "$dir" || arena_fail "cannot create the cache folder $dir; set ARENA_IMAGE_CACHE"
    echo "$dir"
}

# The Debian mirror this host's apt already uses (deb822 or one-line sources).
arena_debian_mirror() {
    local uri
    uri="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
        | grep -E 'debian/?$|debian ' | grep -v security | head -n1 \
        | sed -E 's/^URIs:[[:space:]]*//; s/^deb (\[[^]]*\] )?//; s/[[:space:]].*$//')"
    echo "${uri:-http://deb.debian.org/debian}"
}
