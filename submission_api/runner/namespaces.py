"""A test task's own namespaces and its fresh writable places (issue 19, items 3 and 4).

The fork server's short-lived child (`runner/forkserver.py`, our code only) enters, before it
forks the task's process: a new user namespace (mapping only the run's own uid and gid: nothing
else exists there), and in it new mount, IPC, network and PID namespaces. Then it mounts a new,
empty tmpfs on every writable place (/tmp, /dev/shm, the scratch folders). The task's process
is the first process of its PID namespace: when it ends, the kernel kills every process it
left, and its mounts, IPC objects, sockets (abstract ones included) and files die with the
namespaces; nothing the task could write survives it by construction. It cannot name any
process outside (no signal, prlimit, ptrace, setpriority reaches the supervisor or the fork
server). The supervisor's sweep and verification after each task stay, as the second line.

Where the kernel or the sandbox refuses (Docker's default seccomp profile, an AppArmor profile
that denies mount, a kernel without unprivileged user namespaces), `probe` says so at start-up
and the tasks run in the shared namespaces, swept after each task; `describe` says which.
/proc stays the container's (a new procfs is refused under Docker's masked paths): a task sees
outer pids there, but cannot act on them, and reads the machine's counters in it as they were
before the first task (`MACHINE_COUNTERS`).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from submission_api.runner import task_root

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = \
    0x20000, 0x8000000, 0x10000000, 0x20000000, 0x40000000
TASK_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID
"""Exactly what the sandbox's seccomp profile lets `unshare` take (worker/sandbox_seccomp.py)."""
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
PR_SET_DUMPABLE = 4
FIXED_PLACES = (Path("/tmp"), Path("/dev/shm"))
TMPFS_DEFAULT_SHARE = 2
"""Without a size of its own to copy, a fresh tmpfs takes the kernel's default: half of RAM."""


MACHINE_COUNTERS = tuple(Path("/proc") / name for name in (
    "stat", "vmstat", "schedstat", "diskstats", "interrupts", "softirqs", "uptime", "loadavg",
    "meminfo", "zoneinfo", "buddyinfo", "pagetypeinfo", "pressure/cpu", "pressure/memory",
    "pressure/io", "pressure/irq", "sys/fs/dentry-state", "sys/fs/inode-nr",
    "sys/fs/inode-state", "sys/fs/file-nr"))
"""The machine's own counters in /proc (not namespaced: the container's /proc shows them): CPU
time of every CPU and forks since boot, page faults, interrupts, pressure stalls, the page
cache's size. A task that burns chosen CPU time, forks or touches pages a chosen number of
times would move them for the next task to read. Each task reads them as they were before the
first task (`snapshot_counters`, taken by the fork server), bound over the live files."""
SYS_COUNTERS = (
    "/sys/block/*/stat", "/sys/block/*/inflight", "/sys/block/*/*/stat", "/sys/block/*/*/inflight",
    "/sys/devices/system/node/node*/vmstat", "/sys/devices/system/node/node*/numastat",
    "/sys/devices/system/node/node*/meminfo",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/full_scans",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/pages_collapsed",
    "/sys/kernel/mm/ksm/*", "/sys/kernel/mm/hugepages/*/*")
"""The same in /sys, which the container shares with the machine too: every block device's I/O
counts (a task that reads a file with O_DIRECT moves them), each NUMA node's page counts, the
huge-page and KSM daemons' scan counts (a task that asks for huge or mergeable pages moves
them). Globbed once by `snapshot_counters`, leaving out what no task can move (`_can_move`);
each file is bound on its own (~40 us a file)."""
SYS_COUNTER_FOLDERS = tuple(f"/sys/devices/system/cpu/cpu*/{name}"
                            for name in ("cpuidle", "cpufreq/stats", "thermal_throttle"))
"""Per-CPU counters (time and entries of each idle state, of each frequency, throttling): a
task that keeps chosen CPUs busy moves them. Bound as one copied folder per CPU, not file by
file: a 128-CPU host has thousands of these files."""
COUNTER_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class CounterSnapshot:
    """The machine's counters as the fork server read them before the first task: each file's
    bytes, and each per-CPU folder's files (relative path -> bytes)."""

    files: dict[Path, bytes]
    folders: dict[Path, dict[str, bytes]]


@dataclass(frozen=True)
class TaskWorld:
    """What `enter` made: the places now on a fresh tmpfs (the task may write there), and the
    folders now read from a private copy on it."""

    fresh: tuple[Path, ...]
    copied: tuple[Path, ...] = ()


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _size_bytes(place: Path) -> int:
    """The size of the file system now at `place` (so a fresh tmpfs keeps the sandbox's bound),
    at most the kernel's tmpfs default."""
    info = os.statvfs(place)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1 << 20, min(info.f_blocks * info.f_frsize, memory // TMPFS_DEFAULT_SHARE))


def import_roots() -> list[Path]:
    """Where this process imports from (`sys.path`): a task imports modules after its
    namespaces are made (participant code's lazy imports, ours), so none may be covered."""
    return [Path(p).resolve() for p in sys.path if p and Path(p).is_dir()]


def choose_places(scratch: Iterable[Path], visible: Iterable[Path]) -> list[Path]:
    """The writable places to cover with a fresh tmpfs: the scratch folders, /tmp and /dev/shm,
    but not one that holds a folder the task must still see (the submission or the learner
    under /tmp on a workstation, or a virtual environment or checkout that Python imports
    from there) or another place (which a mount on top would hide)."""
    places = list(dict.fromkeys(Path(p).resolve() for p in [*scratch, *FIXED_PLACES]
                                if Path(p).is_dir()))
    writable = [Path(p).resolve() for p in scratch]
    # not the scratch folders themselves (the process's working folder, say): nothing the run
    # needs is imported from a task's writable place
    keep = [*(Path(p).resolve() for p in visible),
            *(r for r in import_roots() if not any(r.is_relative_to(w) for w in writable))]
    return [p for p in places
            if not any(k.is_relative_to(p) for k in keep)
            and not any(q != p and q.is_relative_to(p) for q in places)]


def _read_counter(path: Path) -> bytes | None:
    try:
        with path.open("rb") as handle:
            return handle.read(COUNTER_MAX_BYTES)
    except OSError:  # gone, a write-only knob, a file the kernel refuses to read
        return None


def _can_move(path: Path) -> bool:
    """False for counters of what a task cannot use: a block device of size 0 (an unattached
    loop device), KSM while its daemon is off, a hugetlb pool with no pages to give."""
    def reads(name: Path, value: bytes) -> bool:
        return _read_counter(name) == value

    text = str(path)
    if "/block/" in text:
        device = path.parent if (path.parent / "size").is_file() else path.parent.parent
        return not reads(device / "size", b"0\n")
    if text.startswith("/sys/kernel/mm/ksm/"):
        return not reads(path.parent / "run", b"0\n")
    if text.startswith("/sys/kernel/mm/hugepages/"):
        return not (reads(path.parent / "nr_hugepages", b"0\n")
                    and reads(path.parent / "nr_overcommit_hugepages", b"0\n"))
    return True


def snapshot_counters() -> CounterSnapshot:
    """`MACHINE_COUNTERS`, `SYS_COUNTERS` and `SYS_COUNTER_FOLDERS` as they read now (call
    before any task runs). Paths are resolved: `/sys/block/vda` is a link into /sys/devices,
    and a bind covers the file whichever name reaches it."""
    files: dict[Path, bytes] = {}
    sys_files = (path for pattern in SYS_COUNTERS for p in glob.glob(pattern)
                 if _can_move(path := Path(p).resolve()))
    for path in (*MACHINE_COUNTERS, *sys_files):
        if path.is_file() and (content := _read_counter(path)) is not None:
            files[path] = content
    folders: dict[Path, dict[str, bytes]] = {}
    for folder in sorted({Path(p).resolve() for pattern in SYS_COUNTER_FOLDERS
                          for p in glob.glob(pattern)}):
        tree = {}
        for root, _dirs, names in os.walk(folder):
            for name in names:
                if (content := _read_counter(Path(root, name))) is not None:
                    tree[os.path.relpath(os.path.join(root, name), folder)] = content
        folders[folder] = tree
    return CounterSnapshot(files, folders)


def enter(scratch: Iterable[Path], visible: Iterable[Path],
          copies: Iterable[tuple[Path, Path]] = (),
          frozen: CounterSnapshot | None = None) -> TaskWorld:
    """Enter the task's namespaces, mount a fresh tmpfs on each place, bind each of `copies`
    (original folder, the run's private tmpfs copy of it: `runner/private_copy.py`) over its
    original and `frozen` (a `snapshot_counters`) over the live counters; call in a process
    that will fork the task's process next (the PID namespace is its children's).

    Raises:
        OSError: a step was refused (nothing of a task has run: the caller decides).
    """
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    scratch, visible = list(scratch), list(visible)
    places = choose_places(scratch, visible)
    sizes = {place: _size_bytes(place) for place in places}  # before: the old mounts' sizes
    if libc.unshare(TASK_NAMESPACES) != 0:
        raise _fail("cannot enter the task's namespaces (unshare)")
    # A process that is not dumpable (the supervisor's protection, inherited by every fork)
    # has /proc/self owned by root: it could not write its own maps.
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise _fail("cannot make the task's mounts private")
    # opened in the new mount namespace (a bind's source must be in it), before the places are
    # covered: a copy may live under one (/dev/shm on a workstation)
    sources = [(Path(original).resolve(), os.open(copy, os.O_PATH | os.O_CLOEXEC))
               for original, copy in copies]
    for place in places:
        options = f"mode=1777,size={sizes[place]}".encode()
        if libc.mount(b"tmpfs", str(place).encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                      options) != 0:
            raise _fail(f"cannot mount a fresh tmpfs on {place}")
    _cover_cgroup_counters(libc)
    if places and frozen:
        _freeze_counters(libc, places[0] / ".arena-private-counters", frozen)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self/fd is root's otherwise (as above)
    try:
        for original, fd in sources:
            if libc.mount(f"/proc/self/fd/{fd}".encode(), str(original).encode(), None,
                          MS_BIND | MS_REC, None) != 0:
                raise _fail(f"cannot bind the private copy over {original}")
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        for _, fd in sources:
            os.close(fd)
    copied = tuple(original for original, _ in sources)
    root = task_root.current()
    if root is not None:  # its own root: no folder it sees keeps a name it looked up
        under_pseudo = [p for p in places if any(p.is_relative_to(q) for q in task_root.PSEUDO)]
        binds = [p for p in dict.fromkeys([*places, *(Path(s).resolve() for s in scratch),
                                           *(Path(v).resolve() for v in visible), *copied])
                 if p not in under_pseudo]
        task_root.enter(root, binds)
    with contextlib.suppress(OSError):
        os.chdir(os.getcwd())  # a folder now covered by a mount: see the mount's
    return TaskWorld(tuple(places), copied)


CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cover_cgroup_counters(libc: ctypes.CDLL) -> None:
    """An empty tmpfs over the cgroup tree: its CPU-time and memory counters (`cpu.stat`,
    `memory.peak`, ...) are the container's, so a task that burns chosen CPU time or memory
    would leave a message there for the next. Best effort: a kernel or profile that refuses
    this mount leaves the tree visible (docs/internals.md, "What remains by construction")."""
    if CGROUP_ROOT.is_dir():
        libc.mount(b"tmpfs", str(CGROUP_ROOT).encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                   b"mode=0555,size=4096")


def _freeze_counters(libc: ctypes.CDLL, folder: Path, frozen: CounterSnapshot) -> None:
    """Bind each snapshot (written to `folder`, on the task's own tmpfs) over its live file or
    folder. Best effort, like the cgroup cover: the census fails where a task sees them move."""
    folder.mkdir(mode=0o755)
    # MS_REC: the one bind the sandbox's seccomp profile allows (a file has no submounts)
    for i, (path, content) in enumerate(frozen.files.items()):
        copy = folder / f"{i}-{path.name}"
        copy.write_bytes(content)
        libc.mount(str(copy).encode(), str(path).encode(), None, MS_BIND | MS_REC, None)
    for i, (path, tree) in enumerate(frozen.folders.items()):
        copy = folder / f"folder-{i}"
        copy.mkdir(mode=0o755)
        for relative, content in tree.items():
            (copy / relative).parent.mkdir(parents=True, exist_ok=True)
            (copy / relative).write_bytes(content)
        libc.mount(str(copy).encode(), str(path).encode(), None, MS_BIND | MS_REC, None)


def probe(scratch: Iterable[Path], visible: Iterable[Path]) -> bool:
    """Whether `enter` works here (tried in a throwaway child, which forks once more: the PID
    namespace must take a process)."""
    scratch, visible = list(scratch), list(visible)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            enter(scratch, visible)
            child = os.fork()
            if child == 0:
                os._exit(0 if os.getpid() == 1 else 1)
            code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        except BaseException:  # noqa: BLE001, S110 - any refusal means: not here
            pass
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def describe(private: bool) -> str:
    """The isolation line of a run (reported by the supervisor's `hello`)."""
    if private:
        return ("own user, mount, IPC, network and PID namespaces per task, fresh tmpfs on "
                "every writable place; swept and verified after each task")
    return ("shared namespaces (refused here: seccomp, AppArmor or the kernel); every task's "
            "leftovers swept and verified after it")
