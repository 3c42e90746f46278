"""What keeps one test task's process from learning anything from another (docs/internals.md,
"Threat model"): the supervisor's own protections and the confinement each task's process enters
before any participant code runs (the sweep after each task is `runner/sweep.py`).

- The supervisor is not dumpable (no same-user ptrace or /proc/<pid>/mem, fd, environ reads) and
  is a child subreaper, so every process a task leaves behind, however it daemonizes, becomes
  the supervisor's child and is killed before the next task is released.
- A task's process confines itself with Landlock where the kernel has it (Linux >= 5.13): writes
  only beneath the scratch areas (which the sweep empties), no TCP, no abstract unix sockets or
  signals reaching outside its own domain, no ptrace of other processes. In the platform's
  sandbox these are defence in depth (the container already has no network and a read-only
  root); on a participant's machine (`arena run`) they are what keeps the run honest.

Linux only; every call degrades to a no-op elsewhere, and says so in `describe()`.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from pathlib import Path

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every arch.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_WRITE_FILE = 1 << 1
FS_WRITE_RIGHTS_V1 = sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
FS_REFER = 1 << 13      # ABI 2
FS_TRUNCATE = 1 << 14   # ABI 3
NET_TCP = 0b11          # ABI 4: bind and connect
SCOPE_ALL = 0b11        # ABI 6: abstract unix sockets and signals


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    libc = _libc()
    return libc is not None and libc.prctl(option, value, 0, 0, 0) == 0


def protect_supervisor() -> None:
    """No same-user process may ptrace this one or read its memory; orphans become its children."""
    _prctl(PR_SET_DUMPABLE, 0)
    become_subreaper()


def become_subreaper() -> None:
    """Orphans of this process's descendants become its children (not an ancestor's)."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_dumpable(dumpable: bool) -> None:
    """The trusted side drops this while it serves tasks (same protection, same reason)."""
    _prctl(PR_SET_DUMPABLE, int(dumpable))


PR_CAPBSET_DROP = 24
CAP_LAST = 63
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _effective_capabilities() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def drop_capabilities() -> bool:
    """Give up every capability for good (bounding set too, where allowed), keeping the user id.

    What makes the supervisor unreadable (not dumpable) binds only processes without
    CAP_SYS_PTRACE, which a participant running `arena run` as root has; a task in a user
    namespace of its own holds every capability there. In the sandbox the task runs as uid 1000
    with none and this changes nothing. Returns whether any were held.
    """
    libc = _libc()
    if libc is None or not _effective_capabilities():
        return False
    for cap in range(CAP_LAST + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last, EPERM unprivileged
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed: the task process would keep "
                      "capabilities")
    return True


MS_BIND, MS_REC = 0x1000, 0x4000


SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def make_read_only_view(writable: Iterable[Path]) -> bool:
    """In the task's own mount namespace (after `runner/namespaces.enter`): every mount
    read-only except `writable` and /dev. Landlock bounds writes of file contents, not of
    extended attributes: without this a task could leave a `user.*` xattr on any folder it owns
    (its home, /tmp on a machine where it runs as root) for the next one. Returns False where
    the kernel has no mount_setattr (Linux < 5.12): nothing changed.
    """
    libc = _libc()
    if libc is None:
        return False
    paths = [str(Path(p).resolve()) for p in writable if Path(p).is_dir()]

    def change(path: str, add: int, clear: int) -> bool:
        attr = _MountAttr(add, clear, 0, 0)
        return libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE,
                            ctypes.byref(attr), ctypes.sizeof(attr)) == 0

    for path in paths:  # a mount of its own, so that it can stay writable
        if libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None) != 0:
            return False
    if not change("/", MOUNT_ATTR_RDONLY, 0):
        return False
    for path in [*paths, "/dev"]:
        if not change(path, 0, MOUNT_ATTR_RDONLY):
            raise OSError(ctypes.get_errno(), f"cannot keep {path} writable for the task")
    return True


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or forbids it, e.g. seccomp)."""
    libc = _libc()
    if libc is None:
        return 0
    version = libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, int(version))


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine(writable: Iterable[Path], device_dir: Path = Path("/dev")) -> int:
    """Confine this process (and what it starts) with Landlock: writes only beneath `writable`
    (plus opening devices for writing, which CUDA needs), no TCP, no reaching abstract sockets or
    signalling processes outside this task. Returns the ABI used (0: not available, no effect).
    """
    abi = landlock_abi()
    libc = _libc()
    if abi < 1 or libc is None:
        return 0
    fs = FS_WRITE_RIGHTS_V1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, NET_TCP if abi >= 4 else 0, SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return 0
    try:
        rules = [(Path(p), fs) for p in writable]
        rules.append((device_dir, FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)))
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(rights, fd)
                libc.syscall(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                             ctypes.byref(rule), 0)
            finally:
                os.close(fd)
        if not _prctl(PR_SET_NO_NEW_PRIVS, 1):
            return 0
        if libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi


def describe() -> str:
    """One line for logs: which protections this machine gives a task."""
    abi = landlock_abi()
    return (f"Landlock ABI {abi}" if abi else "no Landlock (writes outside scratch not blocked)")
