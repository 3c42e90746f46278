"""The submission cache is bounded (issue 13 item 9): before, every zip ever fetched stayed."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from worker.cache_eviction import evict_submissions
from worker.pipeline.fetch import fetch_submission


def _old_zips(cache: Path, n: int, size: int = 1000, age_s: float = 3600) -> list[Path]:
    folder = cache / "submissions"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"{i:064x}.zip"
        path.write_bytes(b"z" * size)
        stamp = time.time() - age_s + i  # zip 0 is the least recently used
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths


def test_least_recently_used_zips_go_first_down_to_the_bound(tmp_path: Path):
    paths = _old_zips(tmp_path, 10)
    keep = paths[0]
    removed = evict_submissions(tmp_path, keep, max_bytes=4000, max_files=100)
    assert removed == paths[1:7]  # the oldest but the kept one
    assert sorted((tmp_path / "submissions").iterdir()) == [keep, *paths[7:]]


def test_recently_used_or_locked_zips_stay(tmp_path: Path):
    paths = _old_zips(tmp_path, 4)
    os.utime(paths[0])  # just used: within the grace period
    lock = tmp_path / "locks" / f"submission-{paths[1].stem}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # another process is fetching it
        removed = evict_submissions(tmp_path, paths[3], max_bytes=0, max_files=0)
    assert removed == [paths[2]]


def test_fetching_keeps_the_cache_bounded(fake_client, tmp_path: Path):
    _old_zips(tmp_path / "cache", 600)  # beyond the default bound of 500 files
    got = fetch_submission(fake_client, fake_client.claimed, "tok", tmp_path / "cache")
    assert got.is_file()
    assert len(list((tmp_path / "cache" / "submissions").glob("*.zip"))) == 500
