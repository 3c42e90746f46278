"""The run's private copy of the submission and the learner, on a tmpfs (issue 34).

Every test task reads the submission and the learner. Read in place, their pages sit in the page
cache every task shares: a task that touches chosen pages of a large shipped file leaves bits
that the next task reads back (by timing a touch, or by the kernel's fault-around and any
residency counter). A tmpfs page cannot be evicted without swap (the sandbox has none), and
the copy writes every byte (no hole is left for a task to fill), so every page of the copy is
resident from before the first task to the end: its residency is constant, whatever a task
touches. The copy is made once per run, before the fork server starts and before any test task,
by our code only; its memory is the run's (in the sandbox the tmpfs is charged to the meta-test
container's memory limit).

Each task reads the copy under the original paths: where the task has its own mount namespace
the fork server's child binds the copy over `/submission` and the learner's folder
(`namespaces.enter`); in shared namespaces the task is pointed at the copy (and the original
stays readable in place: the fallback's isolation line says so). Files, folders and links are
copied; anything else a learner folder may hold (a FIFO, a socket) is left out.

A run SIGKILLed before its `finally` (an `arena run` on a workstation, where the copy lives in
the shared /dev/shm) leaves its copy behind, and nothing of it is alive to remove it. The owner
holds an flock on its copy's folder for its lifetime (the kernel drops it when the last process
holding it dies, however it dies), and the next copy made in the same space removes every copy
of ours whose lock is free: named by our prefix, of our uid, and marked as once locked (the mark
is written under the lock, so a copy being made, not yet locked, is never taken). A live run's
copy is never removed, in whatever pid namespace its owner lives.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

CHUNK = 1 << 20
PREFIX = "arena-copy-"
OWNED = ".owned"
"""Written in a copy's folder under its owner's lock: a folder without it is being made."""
_locks: dict[Path, int] = {}
"""This process's held locks, by copy folder (closed by `remove`; else at the process's end)."""


class CopyTooLarge(OSError):
    """The copy did not fit in the space (memory) the run has for it."""


def is_tmpfs(folder: Path) -> bool:
    """Whether `folder` is on a tmpfs (read from /proc/self/mountinfo: statfs has no Python
    binding)."""
    target = str(Path(folder).resolve())
    best, kind = "", ""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split(" ")
        separator = fields.index("-")
        point = fields[4].encode().decode("unicode_escape")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and \
                len(point) >= len(best):
            best, kind = point, fields[separator + 1]
    return kind == "tmpfs"


def _copy_file(source: Path, target: Path) -> None:
    """Write every byte (a hole in the copy would be a page a task could allocate by touching
    it, for the next task to find)."""
    with source.open("rb") as reader, target.open("wb") as writer:
        while chunk := reader.read(CHUNK):
            writer.write(chunk)
    os.chmod(target, 0o555 if os.stat(source).st_mode & 0o111 else 0o444)


def copy_tree(source: Path, target: Path) -> int:
    """Copy `source` to `target` (files, folders, links; read-only modes); return the bytes
    copied."""
    total = 0
    target.mkdir(mode=0o755)
    for root, dirs, files in os.walk(source):
        relative = Path(root).relative_to(source)
        for name in [*dirs, *files]:
            path, copy = Path(root, name), target / relative / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(path), copy)
                if name in dirs:
                    dirs.remove(name)  # os.walk does not follow it; neither do we
            elif stat.S_ISDIR(mode):
                copy.mkdir(mode=0o755)
            elif stat.S_ISREG(mode):
                _copy_file(path, copy)
                total += os.stat(copy).st_size
    for root, dirs, _files in os.walk(target, topdown=False):
        for name in dirs:
            if not Path(root, name).is_symlink():
                os.chmod(Path(root, name), 0o555)
    os.chmod(target, 0o555)
    return total


def make(folders: list[Path], space: Path) -> list[Path]:
    """Copy each of `folders` into a new private folder under `space` (a tmpfs); return the
    copies, in order.

    Raises:
        CopyTooLarge: the copies do not fit (the run's memory, in the sandbox).
        OSError: `space` is not a tmpfs, or the copy failed.
    """
    if not is_tmpfs(space):
        raise OSError(f"{space} is not a tmpfs: the private copy must not be evictable")
    remove_stale(space)
    run_folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=space))
    copies = []
    try:
        _own(run_folder)
        for i, folder in enumerate(folders):
            copy = run_folder / f"{i}-{Path(folder).name or 'root'}"
            copy_tree(Path(folder).resolve(), copy)
            copies.append(copy)
    except OSError as error:
        remove(run_folder)
        if error.errno == 28:  # ENOSPC
            raise CopyTooLarge(error.errno, "the submission and the learner do not fit in the "
                               "run's memory, which holds a private copy of both during "
                               "meta-test; make them smaller") from error
        raise
    os.chmod(run_folder, 0o555)
    return copies


def make_for_run(folders: list[Path], space: Path | None) -> tuple[list[Path], str]:
    """The run's copies of `folders` on the tmpfs `space` (or, with none given, under /dev/shm
    where it is a tmpfs: `arena run`, on the participant's own machine, where a learner too
    large for it is read in place instead), and the isolation line's words for them.

    Raises:
        CopyTooLarge: they do not fit in `space` (the run's memory).
    """
    place = space if space is not None else Path("/dev/shm")
    if place.is_dir() and is_tmpfs(place):
        try:
            return make(folders, place), "read from a private tmpfs copy"
        except CopyTooLarge:
            if space is not None:  # the run's own, sized to its memory: theirs to fit in
                raise
            return [], "read in place (no room for a private copy in /dev/shm)"
        except OSError as error:
            sys.stderr.write(f"arena supervisor: no private copy in {place}: {error}\n")
    return [], "read in place (no tmpfs for a private copy)"


def _own(folder: Path) -> None:
    """Lock `folder` for this process's lifetime (and its forks': the fork server's, whose
    tasks close what they inherit), then mark it as owned."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    fcntl.flock(fd, fcntl.LOCK_EX)  # blocks only while a cleaner looks at it (no mark yet)
    _locks[folder] = fd
    os.close(os.open(folder / OWNED, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444))


def remove_stale(space: Path) -> list[Path]:
    """Remove the copies in `space` left by runs that are gone (see the module's docstring);
    return them. Skips, never raises: a copy it cannot judge or remove is left as it is."""
    removed = []
    try:
        names = [name for name in os.listdir(space) if name.startswith(PREFIX)]
    except OSError:
        return []
    for name in names:
        folder = Path(space, name)
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:  # gone meanwhile, a link, not ours to read
            continue
        try:
            if os.fstat(fd).st_uid != os.geteuid():
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held: its run is alive
                continue
            # the mark is written under the owner's lock: with it, the owner had the lock
            # and has let it go (ended); without it, the copy is being made
            if os.path.lexists(folder / OWNED) and \
                    os.path.samestat(os.fstat(fd), os.lstat(folder)):
                remove(folder)
                removed.append(folder)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def remove(folder: Path) -> None:
    """Remove a copy (its folders are read-only: made writable first), then let go of its
    lock."""
    for root, dirs, _files in os.walk(folder):
        for name in dirs:
            if not Path(root, name).is_symlink():
                os.chmod(Path(root, name), 0o755)
    if folder.is_dir():
        os.chmod(folder, 0o755)
    shutil.rmtree(folder, ignore_errors=True)
    if (fd := _locks.pop(folder, None)) is not None:
        os.close(fd)


def fingerprint(folders: list[Path]) -> dict[str, tuple[int, int, int]]:
    """(mode, size, ctime) of every entry: what a task in shared namespaces (no read-only
    mount view) could change on the copy by chmod or write; checked after every task."""
    seen = {}
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            for name in [".", *dirs, *files]:
                info = os.lstat(Path(root, name))
                seen[str(Path(root, name))] = (info.st_mode, info.st_size, info.st_ctime_ns)
    return seen


def changed(before: dict[str, tuple[int, int, int]], folders: list[Path]) -> list[str]:
    """What a task changed on the copies (empty: nothing)."""
    now = fingerprint(folders)
    names = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    return [f"the private copy of the submission or the learner changed: {name}"
            for name in names[:10]]
