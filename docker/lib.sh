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

# Fail early, with the figures, when a folder's filesystem has less than $1 GB free (an image
# build that runs out of disk midway leaves half-written layers and a cryptic error).
arena_check_free_disk() {
    local need_gb="$1" folder free_gb
    shift
    for folder in "$@"; do
        [ -n "$folder" ] && [ -d "$folder" ] || continue
        free_gb="$(df -Pk "$folder" | awk 'NR == 2 { print int($4 / 1048576) }')"
        [ "$free_gb" -ge "$need_gb" ] || arena_fail "$folder has ${free_gb} GB free; this build \
needs about ${need_gb} GB (set ARENA_IMAGE_CACHE elsewhere or free some space)"
    done
}
