"""What the trusted manager removes after each test task, and the check that it is gone.

The sweep never assumes it can undo what a task did: every function here removes what it can and
returns a description of whatever is still there afterwards (an empty list: verified gone). The
supervisor fails the run as the participant's when anything is left, with that description, so
a trace that survives the sweep can never reach the next task silently.

- Files: every writable place is emptied with an iterative walk that first gives each folder
  back its owner's rights (a task may leave a folder of mode 000 or 100, which neither `rmtree`
  nor a listing can enter), then the place itself is listed again, and its own inode's extended
  attributes (a `user.*` xattr on `/output` itself) are removed and listed again.
- IPC: System V objects made since the snapshot are removed whoever owns them now (a task may
  hand a segment to uid 0 or 65534 with IPC_SET; its creator may still remove it), and listed
  again; POSIX shared memory and message queues likewise, folders of any mode included.
- Processes: see `kill_descendants` (the manager is every orphan's subreaper).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

IPC_RMID = 0
SYSV_TABLES = {"shm": "shmctl", "msg": "msgctl", "sem": "semctl"}
# /proc/sysvipc columns: shm key shmid perms size cpid lpid nattch uid gid cuid ...;
# msg key msqid perms cbytes qnum lspid lrpid uid gid cuid ...;
# sem key semid perms nsems uid gid cuid ...
CREATOR_COLUMN = {"shm": 9, "msg": 9, "sem": 6}
POSIX_IPC_DIRS = ("/dev/shm", "/dev/mqueue")
SWEEP_ROUNDS = 200
MAX_DEPTH = 4096
"""A bound on the chain of parents walked (pid namespaces nest at most 32 deep; forks in a row
are bounded by the task's process limit)."""
MAX_ENTRIES = 1_000_000
"""A bound on the entries one sweep walks (a tmpfs of a few hundred MiB holds fewer inodes)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _children_of(pid: int) -> list[int]:
    """Every process whose parent is `pid` (from the kernel's own list; a racing exit skipped)."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                found += [int(c) for c in
                          Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def _dead(pid: int) -> bool:
    """Whether every thread of `pid` has exited: a zombie its tracer has not waited for yet (a
    profiler on the host holds a traced child's exit until it does; only then can we reap it).
    A zombie leader whose other threads still run is not dead."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for thread in threads:
        try:
            stat_line = Path(f"/proc/{pid}/task/{thread}/stat").read_bytes()
        except OSError:
            continue
        if stat_line.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
            return False
    return True


def kill_descendants(keep: Iterable[int] = ()) -> int:
    """SIGKILL every descendant of this process but `keep` and reap it; return how many.

    The caller must be a subreaper: a grandchild whose parent dies is reparented to it, so
    repeating until no child is left catches every escape by fork. A child that is dead but
    not reapable (a tracer outside holds its exit) counts as gone: it runs nothing, and its
    own children were reparented to us when it exited.

    Raises:
        RuntimeError: processes still there after SWEEP_ROUNDS rounds.
    """
    me, kept, killed = os.getpid(), set(keep), 0
    for _ in range(SWEEP_ROUNDS):
        for child in _children_of(me):
            if child not in kept:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child, os.WNOHANG)
        children = [c for c in _children_of(me) if c not in kept and not _dead(c)]
        if not children:
            return killed
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.001)
    raise RuntimeError(f"processes left after {SWEEP_ROUNDS} sweeps: {_children_of(me)}")


def processes_of_uid(uid: int, allowed: Iterable[int]) -> list[int]:
    """Pids of processes with real or effective `uid` outside `allowed` (the sandbox's own)."""
    allowed, found = set(allowed), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in allowed:
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{entry.name}/status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if uid in {int(v) for v in line.split()[1:3]}:
                        found.append(int(entry.name))
                    break
    return found


def _parent(pid: int) -> int:
    """`pid`'s parent now (0: gone or unreadable)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def is_below(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is on `pid`'s chain of parents, as it stands now."""
    for _ in range(MAX_DEPTH):
        pid = _parent(pid)
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def stray_processes(uid: int, own: Iterable[int], below: int | None = None) -> list[int]:
    """Pids of processes with real or effective `uid` that are neither `own` nor, when `below`
    is given, beneath process `below` (the fork server, whose children are the next tasks'
    standbys: runner/standby.py).

    Each listed process's parents are read after the listing: a standby that `below` forks
    while this runs is either not listed yet or listed with its parent already set. (A set of
    `below`'s descendants taken before the listing missed a standby forked between the two, and
    the sweep killed it and reported it as left behind by the task: issue 38's "test task 1
    left behind ... process 18".)
    """
    return [pid for pid in processes_of_uid(uid, own)
            if below is None or not is_below(pid, below)]


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _unlock(name: str, dir_fd: int | None = None) -> None:
    with contextlib.suppress(OSError, NotImplementedError):
        os.chmod(name, 0o700, dir_fd=dir_fd)  # a folder (checked by the caller): no link


def _scan(fd: int) -> list[str]:
    """Unlink every non-folder in the folder open as `fd`; return its sub-folders' names."""
    folders = []
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)
    return folders


def _empty_tree(root_fd: int) -> None:
    """Remove everything beneath the folder open as `root_fd` (which is consumed), whatever
    modes the task set, one descriptor at a time and without recursion: relative to open
    folders, so neither a path past PATH_MAX nor a tree 100,000 deep stops it."""
    fd, stack, steps = root_fd, [("", _scan(root_fd))], 0
    try:
        while stack and steps < MAX_ENTRIES:
            steps += 1
            name, pending = stack[-1]
            if pending:
                child = pending.pop()
                _unlock(child, fd)
                try:
                    deeper = os.open(child, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = deeper
                stack.append((child, _scan(fd)))
                continue
            stack.pop()
            if not stack:
                break
            up = os.open("..", DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def _remove_entry(path: str) -> None:
    try:
        info = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    _unlock(path)
    with contextlib.suppress(OSError):
        _empty_tree(os.open(path, DIR_FLAGS))
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _clear_xattrs(path: str) -> list[str]:
    """Remove every extended attribute of `path`'s own inode we may; return those left."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return []  # the filesystem has none (or refuses to list): nothing a task could set
    for name in names:
        with contextlib.suppress(OSError):
            os.removexattr(path, name, follow_symlinks=False)
    with contextlib.suppress(OSError):
        return [f"extended attribute {name!r} on {path}"
                for name in os.listxattr(path, follow_symlinks=False)]
    return []


def _describe_left(folder: Path) -> list[str]:
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as error:
        return [f"{folder} cannot be listed ({error.strerror})"]
    return [f"{folder / name}" for name in names[:10]] + (
        [f"and {len(names) - 10} more entries in {folder}"] if len(names) > 10 else [])


def empty_folder(folder: Path, keep_xattrs: Iterable[str] = ()) -> list[str]:
    """Remove everything inside `folder` (kept) and its own extended attributes; return what is
    still there afterwards (empty: verified empty). `keep_xattrs`: names the platform set itself
    (none today)."""
    if not folder.is_dir():
        return []
    _unlock(str(folder))
    with contextlib.suppress(OSError):
        _empty_tree(os.open(folder, DIR_FLAGS))
    left = _describe_left(folder)
    kept = set(keep_xattrs)
    left += [item for item in _clear_xattrs(str(folder))
             if not any(repr(name) in item for name in kept)]
    return left


@dataclass(frozen=True)
class IpcSnapshot:
    """IPC objects that existed before the first task: never touched (on a participant's machine
    they belong to other programs)."""

    sysv: frozenset[tuple[str, int]]
    posix: frozenset[str]


def sysv_objects() -> list[tuple[str, int, int, int]]:
    """(table, id, owner uid, creator uid) of every visible System V object."""
    found = []
    for table in SYSV_TABLES:
        try:
            lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        owner_column = {"shm": 7, "msg": 7, "sem": 4}[table]
        for line in lines:
            fields = line.split()
            found.append((table, int(fields[1]), int(fields[owner_column]),
                          int(fields[CREATOR_COLUMN[table]])))
    return found


def posix_objects() -> list[str]:
    found: list[str] = []
    for folder in POSIX_IPC_DIRS:
        with contextlib.suppress(OSError):
            found.extend(os.path.join(folder, name) for name in os.listdir(folder))
    return found


def snapshot_ipc() -> IpcSnapshot:
    return IpcSnapshot(frozenset((t, i) for t, i, _, _ in sysv_objects()),
                       frozenset(posix_objects()))


def _remove_sysv(table: str, ident: int) -> None:
    call = getattr(_libc(), SYSV_TABLES[table])
    if table == "sem":
        call(ident, 0, IPC_RMID, None)
    else:
        call(ident, IPC_RMID, None)


def remove_new_ipc(before: IpcSnapshot, creator: int | None = None) -> list[str]:
    """Remove the IPC objects made since `before`, whoever owns them now; return those left.

    `creator`: only objects this uid created (a participant's machine, where other programs
    share the namespace); None: every new object (the sandbox, whose namespace is the run's).
    """
    def new_sysv() -> list[tuple[str, int, int, int]]:
        return [o for o in sysv_objects() if (o[0], o[1]) not in before.sysv
                and (creator is None or o[3] == creator)]

    def new_posix() -> list[str]:
        found = []
        for path in posix_objects():
            if path in before.posix:
                continue
            with contextlib.suppress(OSError):
                if creator is None or os.lstat(path).st_uid == creator:
                    found.append(path)
        return found

    for table, ident, _, _ in new_sysv():
        _remove_sysv(table, ident)
    for path in new_posix():
        _remove_entry(path)
    left = [f"System V {table} object {ident} (owner uid {owner}, creator uid {made})"
            for table, ident, owner, made in new_sysv()]
    return left + [f"{path} (POSIX IPC)" for path in new_posix()]
