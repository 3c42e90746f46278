"""Walks over a tree the participant shaped (/output): measure it, copy it out, remove it.

The participant decides the tree's depth, its width, its names and its kinds, so each walk is
iterative (a 1,500-level tree made `os.walk` and `shutil.rmtree` raise RecursionError, a free
platform error at will, issue 21), bounded in depth and entries, works on directory
descriptors where a path would outgrow PATH_MAX, and never raises on what it finds.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import stat
from collections.abc import Generator
from pathlib import Path

log = logging.getLogger(__name__)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

MAX_OUTPUT_DEPTH = 64
"""Folder nesting below /output that a run may use; predictions and a learner need a few. A
1,500-level tree made the recursive walk raise RecursionError, a free platform error (issue 21)."""
MAX_OUTPUT_ENTRIES = 100_000
"""Paths a run may leave in /output; each costs the walk a stat on every poll."""
TOO_BIG = 1 << 62
"""What `compute_usage` reports for a tree over its shape bounds: over any size bound."""


def _entries(root: Path) -> Generator[tuple[int, str, bool, int], None, None]:
    """Every entry under `root` as (its folder's descriptor, name, is a folder, depth of the
    folder it names), depth first, iteratively on descriptors (no path grows with the depth).
    Unreadable folders yield nothing; the caller bounds the walk by stopping (closing) it."""
    try:
        stack = [(os.open(root, _DIR_FLAGS), 0)]
    except OSError:
        return
    try:
        while stack:
            fd, depth = stack.pop()
            try:
                with os.scandir(fd) as listing:
                    names = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
                for name, is_dir in names:
                    yield fd, name, is_dir, depth + 1
                    if is_dir:
                        with contextlib.suppress(OSError):
                            stack.append((os.open(name, _DIR_FLAGS, dir_fd=fd), depth + 1))
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)


def compute_usage(root: Path) -> int:
    """Bytes under `root`, each path counted at the larger of its apparent and allocated size.

    Links are not followed; every hard link counts in full, as a copy would make it. The walk is
    iterative, on directory descriptors (no path grows with the depth, so no ENAMETOOLONG), and
    bounded: a tree deeper than MAX_OUTPUT_DEPTH or with more than MAX_OUTPUT_ENTRIES paths
    counts as TOO_BIG, so every bound calls it exceeded (the participant's `bad_predictions`).
    Never raises: an unreadable entry costs nothing, an unreadable root is empty.
    """
    total = 0
    with contextlib.closing(_entries(root)) as entries:
        for count, (fd, name, is_dir, depth) in enumerate(entries, start=1):
            if count > MAX_OUTPUT_ENTRIES or (is_dir and depth > MAX_OUTPUT_DEPTH):
                return TOO_BIG
            with contextlib.suppress(OSError):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                total += max(info.st_size, info.st_blocks * 512)
    return total


def shape_bound(root: Path) -> str | None:
    """Which shape bound `root` passes, in words for the participant (None: neither): a run
    that nests 1,500 folders is told of the depth bound, not of a size it never used."""
    with contextlib.closing(_entries(root)) as entries:
        for count, (_, _, is_dir, depth) in enumerate(entries, start=1):
            if count > MAX_OUTPUT_ENTRIES:
                return (f"the output folder holds more than {MAX_OUTPUT_ENTRIES:,} files and "
                        "folders; write only predictions and a compact learner")
            if is_dir and depth > MAX_OUTPUT_DEPTH:
                return (f"the output folder nests folders deeper than {MAX_OUTPUT_DEPTH} "
                        "levels; keep the learner's tree shallow")
    return None


def copy_regular_tree(src: Path, dest: Path, budget_bytes: int) -> None:
    """Copy folders and regular files only: links, fifos and devices are left behind.

    At most `budget_bytes` of apparent size are written: a file that would pass it is skipped
    (logged), so no sparse file or hard-link farm can be expanded onto the worker's disk. The
    walk is iterative and stops at MAX_OUTPUT_DEPTH (callers copy only a tree `compute_usage`
    found within its bounds); a path that cannot be copied is skipped and logged, never raised.
    """
    left = budget_bytes
    stack: list[tuple[Path, int]] = [(Path(), 0)]
    while stack:
        rel, depth = stack.pop()
        try:
            (dest / rel).mkdir(parents=True, exist_ok=True)
            with os.scandir(src / rel) as listing:
                children = [(e.name, e.is_dir(follow_symlinks=False),
                             e.is_file(follow_symlinks=False)) for e in listing]
        except OSError as exc:
            if exc.errno in HOST_ERRNOS:
                raise
            log.warning("run.output.copy_skipped", extra={"path": str(rel), "error": str(exc)})
            continue
        for name, is_dir, is_file in children:
            if is_dir and depth < MAX_OUTPUT_DEPTH:
                stack.append((rel / name, depth + 1))
            elif is_file:
                left = _copy_file(src / rel / name, dest / rel / name, left)


def _copy_file(path: Path, target: Path, left: int) -> int:
    """Copy one regular file within `left` bytes of budget; returns the budget left."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return left
        if info.st_size > left:
            log.warning("run.output.copy_skipped", extra={"path": str(path),
                                                          "bytes": info.st_size})
            return left
        shutil.copyfile(path, target, follow_symlinks=False)
        return left - info.st_size
    except OSError as exc:
        if exc.errno in HOST_ERRNOS:
            raise
        log.warning("run.output.copy_skipped", extra={"path": str(path), "error": str(exc)})
        return left


HOST_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
"""Errors of the worker's own disk while copying out: raised (a platform fault), never skipped."""



def remove_tree(root: Path) -> None:
    """Delete `root` and everything under it, however deep, without following links.

    Iterative on directory descriptors; what cannot be removed is left (never raises).
    """
    try:
        info = os.lstat(root)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(root)
        return
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return
    # Each frame: (descriptor, the names still to visit in it, its name in the parent).
    stack: list[tuple[int, list[str], str]] = [(top, _list(top), "")]
    while stack:
        fd, names, _ = stack[-1]
        if names:
            name = names.pop()
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # not a folder (or gone): unlink it
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
                continue
            stack.append((child, _list(child), name))
            continue
        os.close(fd)
        _, _, own_name = stack.pop()
        if stack:
            with contextlib.suppress(OSError):
                os.rmdir(own_name, dir_fd=stack[-1][0])
    with contextlib.suppress(OSError):
        os.rmdir(root)


def _list(fd: int) -> list[str]:
    try:
        with os.scandir(fd) as listing:
            return [entry.name for entry in listing]
    except OSError:
        return []
