"""Bring every page of a file tree into the page cache (issue 34): the trusted side's half of
"touching a shared file carries nothing".

The sandbox image's files and the phase's data are shared by every run on a worker host (overlay2
shares the image's page cache between containers; the data's compiled files are hard links into
one cache). A run that touches chosen pages of a file nobody else maps leaves bits in which pages
are resident, for a later run of another account (or a later task) to read. Read in full before
each run, every page is resident when participant code starts, so a touch changes nothing. Pages
are charged to the cgroup of whoever first brings them in: the worker (the data) or a short-lived
container of the image run before the run (the image, `worker/prefault.py`), whose charge passes
to its parent cgroup when it ends. Neither is the run's cgroup, so the run's own memory pressure
cannot evict them either; only the host's memory pressure can, and the next pre-fault brings
them back (docs/internals.md, what remains).

Usage (inside a container of the image): python -m submission_api.runner.prefault / [ROOT ...]
prints one JSON line: files and bytes read, seconds.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys
import time
from collections.abc import Iterable
from pathlib import Path

SKIP = ("/proc", "/sys", "/dev", "/run", "/tmp", "/output", "/opt/arena")
"""Not the image's files: kernel views, mounts of the run, the platform's code (the worker's own
files on the host, not the image's)."""
CHUNK = 1 << 20
SYS_CACHESTAT = 451
"""cachestat(2) (Linux 6.5; the same number on every architecture): how many of a file's pages
are in the page cache, without touching them. The trusted side's own check, never a task's
(the sandbox's filter refuses it)."""


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


_LIBC = ctypes.CDLL(None, use_errno=True)
_cachestat_works = [True]


def fully_cached(fd: int, size: int) -> bool:
    """Whether every page of the open file is in the page cache (cachestat); False where the
    kernel or a seccomp profile refuses it, so the caller reads the file."""
    if not _cachestat_works[0] or size == 0:
        return False
    span, found = _Range(0, 0), _Stat()  # len 0: to the end of the file
    if _LIBC.syscall(SYS_CACHESTAT, fd, ctypes.byref(span), ctypes.byref(found), 0) != 0:
        _cachestat_works[0] = False
        return False
    return found.nr_cache >= -(-size // os.sysconf("SC_PAGE_SIZE"))


def _files(roots: Iterable[Path], one_device: bool) -> Iterable[Path]:
    for root in roots:
        root = Path(root)
        device = os.stat(root).st_dev
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if str(Path(folder, d)) not in SKIP
                       and not (one_device and _other_device(Path(folder, d), device))]
            for name in files:
                yield Path(folder, name)


def _other_device(path: Path, device: int) -> bool:
    try:
        return os.lstat(path).st_dev != device
    except OSError:
        return True


def read_tree(roots: Iterable[Path], one_device: bool = False) -> dict[str, float]:
    """Read every regular file under `roots` (links not followed; with `one_device`, only the
    file system each root is on); unreadable files are skipped (what this user cannot read, a
    sandbox of the same user cannot touch). A file whose pages cachestat finds all cached is
    not read (its residency is already what the read would make it). Returns files, bytes
    read, files found cached, and seconds."""
    started = time.perf_counter()
    buffer = bytearray(CHUNK)
    files = total = cached = 0
    for path in _files(roots, one_device):
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if fully_cached(fd, info.st_size):  # nothing to bring in: no read needed
                files += 1
                cached += 1
                continue
            while read := os.readv(fd, [buffer]):
                total += read
            files += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return {"files": files, "bytes": total, "cached": cached,
            "seconds": round(time.perf_counter() - started, 3)}


def main(argv: list[str] | None = None) -> int:
    roots = [Path(p) for p in (argv if argv is not None else sys.argv[1:]) or ["/"]]
    sys.stdout.write(json.dumps(read_tree(roots, one_device=True)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
