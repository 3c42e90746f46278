"""Eviction of the worker's submission cache: least recently used zips go first, until the
cache is back under its bounds (bytes and count).

Without it the cache only grew (32 zips, 191 MB after one afternoon). Every use of a cached zip
touches its mtime, so mtime order is use order. A zip is never removed while another process
holds its cache lock (it is being fetched or checked), nor within `grace_s` of its last use (a
run extracts its zip right after fetching it, outside the lock), nor the one just fetched.
Datasets are not evicted here: they are few, large and shared by every run of a phase.
"""

from __future__ import annotations

import fcntl
import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)

MAX_SUBMISSION_CACHE_BYTES = 2 * 1024**3
MAX_SUBMISSION_CACHE_FILES = 500
GRACE_S = 600.0


def evict_submissions(cache_dir: Path, keep: Path, *,
                      max_bytes: int = MAX_SUBMISSION_CACHE_BYTES,
                      max_files: int = MAX_SUBMISSION_CACHE_FILES,
                      grace_s: float = GRACE_S) -> list[Path]:
    """Remove the least recently used zips of `<cache_dir>/submissions` beyond the bounds.

    Returns the removed paths. Never raises for a file that vanished meanwhile.
    """
    entries = []
    for path in (cache_dir / "submissions").glob("*.zip"):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        entries.append((stat.st_mtime, stat.st_size, path))
    entries.sort()
    total, count = sum(size for _, size, _ in entries), len(entries)
    removed, now = [], time.time()
    for mtime, size, path in entries:
        if total <= max_bytes and count <= max_files:
            break
        if path == keep or now - mtime < grace_s or not _remove_unlocked(cache_dir, path):
            continue
        total, count = total - size, count - 1
        removed.append(path)
    if removed:
        log.info("cache.evicted", extra={"files": len(removed), "left_bytes": total})
    return removed


def _remove_unlocked(cache_dir: Path, path: Path) -> bool:
    """Delete `path` if no process holds its cache lock (see fetch.cache_lock)."""
    lock = cache_dir / "locks" / f"submission-{path.stem}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            path.unlink(missing_ok=True)
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return True
