"""A test task's own root: every folder it can look a name up in is on a tmpfs (issue 34).

Why: the kernel keeps a negative dentry for every name looked up and not found. A task that
`stat`s chosen missing names in a folder it can see leaves one per bit; the next task times its
lookups of the same names (a cached miss is 2-3 us, an uncached one 4-12 us). Measured inside
the sandbox between two tasks' namespaces (`benchmarks/bench_task_dentry.py`): 93-98% of 256
bits cross through the image's folders (overlay), its root folder, the platform's code (a bind
of the worker's folder) and /sys; a fresh overlay or a fresh root with the image's folder bound
in still carries 69-89% (their lookups go down to the shared file system). On a tmpfs, in /proc
and in /dev (a tmpfs) it is chance: a tmpfs keeps no negative dentry (`simple_lookup` marks
each one to be deleted when unused), and its positive ones are the files themselves, the same
for every task.

So, once per run, before any task (`prepare`), the supervisor copies onto the run's tmpfs what a
task needs to look names up in: the folders Python imports from (`sys.path`: the standard
library, site-packages, the platform's code), the shared libraries, /etc, /usr/bin. Files over
`BIG_FILE` are not copied (torch's libraries: 600 MB); an empty file marks their place. On the
platform the worker makes that copy once per image and binds it read-only into every run
(`task_root_shared`, issue 38: 4-5 s and ~290 MB a run no longer charged to the participant);
`for_run` uses it where it matches the run, and copies only where it does not. Each task then
(`enter`, in its own user and mount namespace, after `namespaces.enter`):

- binds the copy onto itself, and into it /proc and /dev (with the task's fresh /dev/shm),
  the task's fresh writable places, the private copies of the submission and the learner, and
  each big file (a file has no names to look up), the big files from an overlay of our own over
  the image's root, so that no mount the task sees names Docker's layers;
- `pivot_root`s into it and detaches the old root, and that overlay.

What a task can then see: no host path and no container id in its mount table, and no folder
on the image's overlay, the host's file system or sysfs (/sys is left out: it keeps negative
dentries; it would be bound in where an NVIDIA device is present, which CUDA needs, but a GPU
host keeps the container's root for now: CUDA's libraries outside `sys.path` and
`SYSTEM_TREES` are not tried, and the isolation line says so). Where `pivot_root` is refused
(the sandbox's seccomp profile of before, a kernel or AppArmor profile that denies it) nothing
changes: `for_run` says so and copies nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

BIG_FILE = 1 << 20
"""Files larger than this are bound in, not copied (a file has no names to look up)."""
SYSTEM_TREES = ("/etc", "/usr/bin", "/usr/lib64", "/usr/lib/*-linux-gnu", "/usr/share/zoneinfo")
"""Besides `sys.path`: what a task's process or a program it starts opens by name."""
PSEUDO = ("/proc", "/dev")
"""Bound in whole: /proc keeps no negative dentry, /dev is the container's tmpfs."""
GPU_DEVICES = "/dev/nvidia[0-9]*"
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MNT_DETACH = 0x2, 0x4, 0x1000, 0x4000, 2
MOUNT_ATTR_RDONLY = 1
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x10000000, 0x20000, 0x8000000, \
    0x40000000


@dataclass(frozen=True)
class Root:
    """The run's copy (`folder`, on a tmpfs) and the big files to bind into it."""

    folder: Path
    big: tuple[Path, ...]
    with_sys: bool
    lowers: tuple[Path, ...] = ()
    """The folders to mount an overlay of for the big files (`image_lowers`)."""
    shared: bool = False
    """The worker's read-only copy for every run of the image (`task_root_shared`)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _pivot_root(libc: ctypes.CDLL, new: Path, old: Path) -> int:
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        ctypes.set_errno(38)  # ENOSYS
        return -1
    return int(libc.syscall(number, str(new).encode(), str(old).encode()))


def pivot_root_permitted(space: Path) -> bool:
    """Whether a process in a new user and mount namespace may `pivot_root` here (tried in a
    throwaway child, into an empty tmpfs on a folder made in `space`)."""
    try:
        trial = Path(tempfile.mkdtemp(prefix="arena-root-probe-", dir=space))
    except OSError:
        return False
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                libc = _libc()
                uid, gid = os.getuid(), os.getgid()
                _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET),
                       "unshare")
                libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self is root's otherwise
                for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                                   ("gid_map", f"{gid} {gid} 1")):
                    with open(f"/proc/self/{name}", "w") as handle:
                        handle.write(text)
                _check(libc.mount(None, b"/", None, MS_REC | 0x40000, None), "private")
                _check(libc.mount(b"tmpfs", str(trial).encode(), b"tmpfs",
                                  MS_NOSUID | MS_NODEV, b"mode=0755"), "tmpfs")
                (trial / "old").mkdir()
                _check(_pivot_root(libc, trial, trial / "old"), "pivot_root")
                os.chdir("/")
                _check(libc.umount2(b"/old", MNT_DETACH), "umount2")
                code = 0
            except BaseException:  # noqa: BLE001, S110 - any refusal means: not here
                pass
            finally:
                os._exit(code)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    finally:
        with contextlib.suppress(OSError):
            trial.rmdir()


def trees(leave_out: Iterable[Path]) -> list[Path]:
    """The folders to copy: `SYSTEM_TREES` and `sys.path`, none inside another, none inside
    (or holding) what is bound in instead (`leave_out`: the submission, the learner, the
    writable places)."""
    from submission_api.runner.namespaces import import_roots

    skip = [Path(p).resolve() for p in leave_out] + [Path(p) for p in PSEUDO]
    found = [Path(p).resolve() for pattern in SYSTEM_TREES for p in sorted(glob.glob(pattern))
             if Path(p).is_dir()]
    found += [p for p in import_roots() if p != Path("/")]
    found = [p for p in dict.fromkeys(found)
             if not any(p.is_relative_to(s) or s.is_relative_to(p) for s in skip)]
    return [p for p in found if not any(q != p and p.is_relative_to(q) for q in found)]


def _walk(source: Path) -> Iterable[tuple[str, list[str], list[str]]]:
    """`os.walk` of a tree to copy, without C header folders (torch's: 9,400 files; no
    compiler in the image, no task reads them)."""
    for root, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if d != "include" or Path(root, d, "__init__.py").exists()]
        yield root, dirs, files


def _size(sources: Iterable[Path]) -> int:
    """The bytes `_copy` would copy from `sources`."""
    total = 0
    for source in sources:
        for root, _dirs, files in _walk(source):
            for name in files:
                with contextlib.suppress(OSError):
                    info = os.lstat(os.path.join(root, name))
                    if stat.S_ISREG(info.st_mode) and info.st_size <= BIG_FILE:
                        total += info.st_size
    return total


MEMORY_SHARE = 4
"""The copy may take at most 1/4 of the run's tmpfs (sized to, and charged to, the run's
memory); a run whose memory is smaller keeps the container's root (and says so)."""


def _copy(source: Path, target: Path, big: list[Path], budget: list[int]) -> None:
    """Copy the tree `source` to `target` (folders, links, files up to `BIG_FILE`; a bigger
    file gets an empty stand-in and is listed in `big`), taking the bytes from `budget[0]`.

    Raises:
        OSError: the budget ran out (ENOSPC)."""
    for root, dirs, files in _walk(source):
        here = target / Path(root).relative_to(source)
        here.mkdir(mode=0o755, parents=True, exist_ok=True)
        for name in [*dirs, *files]:
            path, copy = Path(root, name), here / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(path), copy)
                if name in dirs:
                    dirs.remove(name)
            elif stat.S_ISREG(info.st_mode):
                if info.st_size > BIG_FILE:
                    copy.touch(mode=0o444)
                    big.append(path)
                elif os.access(path, os.R_OK):
                    budget[0] -= info.st_size
                    if budget[0] < 0:
                        raise OSError(28, f"the copy of the image's folders takes more than "
                                          f"1/{MEMORY_SHARE} of the run's memory")
                    shutil.copyfile(path, copy)
                else:  # /etc/shadow: the name stays, its bytes are no task's to read
                    copy.touch()
                os.chmod(copy, (0o555 if info.st_mode & 0o111 else 0o444) & info.st_mode)


def prepare(space: Path, leave_out: Iterable[Path], points: Iterable[Path],
            share: int = MEMORY_SHARE) -> Root:
    """The run's copy on the tmpfs `space` (see the module's docstring), with an empty folder
    at each of `points` and at /proc, /dev, /sys; it may take 1/`share` of `space`.

    Raises:
        OSError: it does not fit, or `space` refused it (the caller goes on without a root).
    """
    folder = Path(tempfile.mkdtemp(prefix="arena-root-", dir=space))
    big: list[Path] = []
    info = os.statvfs(space)
    budget = [info.f_blocks * info.f_frsize // share]
    try:
        if _size(trees(leave_out)) > budget[0]:  # before copying anything: a small run's
            raise OSError(28, f"the copy of the image's folders takes more than "
                              f"1/{MEMORY_SHARE} of the run's memory")
        for tree in trees(leave_out):
            _copy(tree, folder / tree.relative_to("/"), big, budget)
        for entry in os.listdir("/"):  # merged /usr: /bin -> usr/bin, /lib64 -> usr/lib64
            if os.path.islink(f"/{entry}") and not (folder / entry).exists():
                os.symlink(os.readlink(f"/{entry}"), folder / entry)
        wanted = [*(Path(p).resolve() for p in points),
                  *(Path(p) for p in (*PSEUDO, "/sys", "/.old", "/.empty"))]
        for point in wanted:
            (folder / point.relative_to("/")).mkdir(parents=True, exist_ok=True)
        for i in range(len(big)):  # at most one overlay per big file
            (folder / ".big" / str(i)).mkdir(parents=True)
        for root, dirs, _files in os.walk(folder):
            for name in dirs:
                os.chmod(Path(root, name), 0o755)
    except BaseException:
        remove(folder)
        raise
    with_sys = bool(glob.glob(GPU_DEVICES))
    return Root(folder, tuple(big), with_sys, tuple(image_lowers(big)))


def mount_points() -> list[Path]:
    """Where something is mounted (this mount namespace's table)."""
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            points.append(Path(line.split(" ")[4].encode().decode("unicode_escape")))
    return points


def image_lowers(big: Iterable[Path]) -> list[Path]:
    """For the big files on the image's file system: the highest folders that hold them with
    no mount under them (the kernel refuses an overlay whose lower folder has a mount locked
    under it: Docker's /sbin/docker-init under /usr, say)."""
    image, points = os.stat("/").st_dev, [p for p in mount_points() if p != Path("/")]
    lowers: list[Path] = []
    for path in big:
        if os.stat(path).st_dev != image or any(path.is_relative_to(q) for q in lowers):
            continue
        for depth in range(2, len(path.parts)):
            folder = Path(*path.parts[:depth])
            if not any(p.is_relative_to(folder) for p in points):
                lowers.append(folder)
                break
    return lowers


def remove(folder: Path) -> None:
    from submission_api.runner.task_root_shared import TARGET

    if not folder.is_relative_to(TARGET):  # the worker's shared copy stays (read-only)
        shutil.rmtree(folder, ignore_errors=True)


def enter(root: Root, binds: Iterable[Path]) -> None:
    """In the task's user and mount namespace (after `namespaces.enter`): bind `root`'s copy
    onto itself and into it `PSEUDO`, each of `binds` (folders, at the same paths) and the big
    files; `pivot_root` into it; detach the old root.

    Raises:
        OSError: a step was refused (the caller decides; nothing of a task has run).
    """
    libc = _libc()
    new = root.folder
    cwd = os.getcwd()
    _check(libc.mount(str(new).encode(), str(new).encode(), None, MS_BIND | MS_REC, None),
           "bind the task's root")
    pseudo = [*PSEUDO, *(["/sys"] if root.with_sys else [])]
    for place in [*(Path(p) for p in pseudo), *(Path(p).resolve() for p in binds)]:
        target = new / place.relative_to("/")
        target.mkdir(parents=True, exist_ok=True)
        _check(libc.mount(str(place).encode(), str(target).encode(), None, MS_BIND | MS_REC,
                          None), f"bind {place} into the task's root")
    # The big files through an overlay of our own over each top folder of the image's that
    # holds one (/usr): bound straight from the image, each would show Docker's layer paths in
    # the task's mount table. (Not over / itself: the kernel refuses a lower folder with
    # mounts locked under it.)
    for i, lower in enumerate(root.lowers):
        view = new / ".big" / str(i)
        _check(libc.mount(b"overlay", str(view).encode(), b"overlay", MS_NOSUID | MS_NODEV,
                          f"lowerdir={lower}:{new / '.empty'},userxattr".encode()),
               f"mount an overlay of {lower} for the big files")
    for path in root.big:
        source = next((new / ".big" / str(i) / path.relative_to(lower)
                       for i, lower in enumerate(root.lowers) if path.is_relative_to(lower)),
                      path)
        _check(libc.mount(str(source).encode(), str(new / path.relative_to("/")).encode(), None,
                          MS_BIND | MS_REC, None), f"bind {path} into the task's root")
    _check(_pivot_root(libc, new, new / ".old"), "pivot_root into the task's root")
    os.chdir("/")
    # the copy is every task's: read-only now (`isolation.make_read_only_view` makes the rest
    # so later), or no root at all
    from submission_api.runner.isolation import AT_FDCWD, SYS_MOUNT_SETATTR, _MountAttr

    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", 0, ctypes.byref(attr),
                        ctypes.sizeof(attr)), "make the task's root read-only")
    _check(libc.umount2(b"/.old", MNT_DETACH), "detach the old root")
    for i in range(len(root.lowers)):
        _check(libc.umount2(f"/.big/{i}".encode(), MNT_DETACH), "detach a big files' overlay")
    with contextlib.suppress(OSError):
        os.chdir(cwd)


def describe(root: Root | None, why: str = "") -> str:
    """The isolation line's words for the task's root."""
    if root is None:
        return f"the container's root (no per-task root: {why})" if why else \
            "the container's root"
    not_used = f" (the worker's shared copy not used: {why})" if why else ""
    where = "the worker's shared read-only tmpfs copy" if root.shared else \
        f"the run's tmpfs copy{not_used}"
    return (f"a per-task root on {where} of the image's folders (no shared "
            "folder keeps a name a task looked up" +
            ("; /sys bound in for the GPU" if root.with_sys else "") + ")")


_run_root: Root | None = None
"""The run's root, set by the supervisor before it forks the fork server (which, and whose
children, inherit it): `namespaces.enter` takes it from here."""


def use(root: Root | None) -> None:
    global _run_root  # noqa: PLW0603 - one per run, set before any fork (see above)
    _run_root = root


def current() -> Root | None:
    return _run_root


def for_run(space: Path | None, scratch: Iterable[Path], visible: Iterable[Path]
            ) -> tuple[Root | None, str]:
    """The run's root (made and put in use) where `pivot_root` is permitted and `space` (the
    run's tmpfs) holds the copy; else None, and why."""
    if space is None or not space.is_dir():
        return None, "no tmpfs for the run's copy"
    if glob.glob(GPU_DEVICES):  # CUDA's libraries and /sys: not tried yet (no GPU host here)
        return None, "a GPU host, where the per-task root is not tried yet"
    if not pivot_root_permitted(space):
        return None, "pivot_root refused here (seccomp, AppArmor or the kernel)"
    from submission_api.runner.namespaces import FIXED_PLACES
    from submission_api.runner.task_root_shared import load

    places: list[Path] = [*scratch, *visible, *FIXED_PLACES]
    shared, not_shared = load(places)  # the worker's copy: nothing to copy here
    if shared is not None:
        use(shared)
        return shared, ""
    try:
        root = prepare(space, places, places)
    except OSError as error:
        why = f"the copy of the image's folders did not fit: {error.strerror or error}"
        return None, f"{why}; the worker's shared copy not used: {not_shared}" if not_shared \
            else why
    use(root)
    return root, not_shared
