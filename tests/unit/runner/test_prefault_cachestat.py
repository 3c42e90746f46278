"""The pre-fault reads only files not already wholly in the page cache (issue 34.5): cachestat
tells, without touching a page, and a file found cached is left as it is (its residency is what
a read would make it); an evicted file is read, after which every page is cached."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from submission_api.runner import prefault


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def _cached(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return prefault.fully_cached(fd, path.stat().st_size)
    finally:
        os.close(fd)


def test_a_cached_file_is_not_read_again_and_an_evicted_one_is(tmp_path: Path):
    data = tmp_path / "tree" / "data.bin"
    data.parent.mkdir()
    data.write_bytes(os.urandom(1 << 20))
    prefault.read_tree([data.parent])
    if not prefault._cachestat_works[0]:
        pytest.skip("no cachestat here (Linux < 6.5 or a seccomp profile): every file is read")
    if not _cached(data):  # just read in full, yet not seen: an overlay's inode, say
        pytest.skip("cachestat does not see this file system's page cache (overlayfs): every "
                    "file is read, as where it is refused")
    cached = prefault.read_tree([data.parent])
    assert (cached["cached"], cached["bytes"]) == (1, 0)

    _evict(data)
    if _cached(data):
        pytest.skip("this file system kept the pages through DONTNEED")
    cold = prefault.read_tree([data.parent])
    assert (cold["cached"], cold["bytes"]) == (0, 1 << 20)
    assert _cached(data)
