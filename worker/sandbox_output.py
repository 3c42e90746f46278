"""The sandbox's one writable folder, and how its size is bounded.

Two mechanisms, chosen per host:
- `loop` (preferred, needs root, mkfs.ext4 and loop devices): a fresh ext4 image file of the
  bound's size, loop-mounted (nosuid, nodev, noexec) and bind-mounted as /output. The kernel
  enforces the bound: a write beyond it fails with ENOSPC, and nothing can fill the worker's disk.
  After the run, regular files and folders (never links, fifos or devices) are copied into the
  caller's output folder and the image is unmounted and deleted.
- `watchdog` (fallback for unprivileged workers): the caller's folder is bind-mounted directly and
  the driver polls its size; on excess the container is killed. The bound can be overshot by what
  is written within one poll interval, so production workers should run the `loop` mechanism.
Either way `exceeded()` tells the driver that the run used more than its bound. The bound counts
each path's apparent size as well as its allocated blocks: a sparse file (or many hard links to one
file) costs almost no blocks but would cost its full size to whoever reads or copies it, so the
copy-out is bounded by apparent size too and is skipped altogether once the bound is exceeded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from worker.output_walk import compute_usage, copy_regular_tree, remove_tree
from worker.sandbox_result import SandboxPlatformError

log = logging.getLogger(__name__)
MIB = 1024 * 1024
FULL_SLACK_BYTES = 64 * 1024  # below this much free space, a write has (nearly) hit the bound
SANDBOX_OWNER = (1000, 1000)
UMOUNT_RETRY_S = (0.1, 0.3, 1.0)
"""Pauses after each plain `umount` refused as busy, before the lazy one."""


class OutputArea(Protocol):
    """Host side of /output while a run lasts."""

    mount_source: Path
    live_check: bool  # True when exceeded() must be polled during the run (watchdog)

    def exceeded(self) -> bool: ...


def pick_mechanism() -> str:
    """`loop` when this process can make and mount filesystem images, else `watchdog`."""
    can_loop = (os.geteuid() == 0 and shutil.which("mkfs.ext4") and shutil.which("mount")
                and Path("/dev/loop-control").exists())
    return "loop" if can_loop else "watchdog"


@contextlib.contextmanager
def open_output_area(dest: Path, limit_mb: int, mechanism: str = "auto") -> Iterator[OutputArea]:
    """Yield the area to mount as /output; on exit `dest` holds what the run wrote.

    Raises SandboxPlatformError when the image cannot be made or mounted.
    """
    mechanism = pick_mechanism() if mechanism == "auto" else mechanism
    dest.mkdir(parents=True, exist_ok=True)
    if mechanism == "watchdog":
        yield WatchdogArea(dest, limit_mb)
        return
    if mechanism != "loop":
        raise ValueError(f"output mechanism {mechanism!r}: expected 'auto', 'loop' or 'watchdog'")
    area = LoopArea(dest, limit_mb)
    try:
        area.create()
        yield area
    finally:
        area.close()


def _chown_for_sandbox(path: Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, *SANDBOX_OWNER)
    else:  # the sandbox user is not us: let it write, in a folder only we can reach anyway
        path.chmod(0o777)


class WatchdogArea:
    """The caller's folder itself, bounded by polling (see module docstring)."""

    live_check = True

    def __init__(self, dest: Path, limit_mb: int) -> None:
        self.mount_source = dest
        self.limit_bytes = limit_mb * MIB
        _chown_for_sandbox(dest)

    def exceeded(self) -> bool:
        return compute_usage(self.mount_source) > self.limit_bytes


class LoopArea:
    """A loop-mounted ext4 image of the bound's size (see module docstring)."""

    live_check = False

    def __init__(self, dest: Path, limit_mb: int) -> None:
        self.dest = dest
        self.limit_bytes = limit_mb * MIB
        self.workdir = Path(tempfile.mkdtemp(prefix=".arena-output-", dir=dest.parent))
        self.image = self.workdir / "output.ext4"
        self.mount_source = self.workdir / "mnt"
        self.mounted = False
        self.baseline = 0

    def create(self) -> None:
        # Headroom for ext4 metadata, so that the participant can use the whole bound.
        size = self.limit_bytes + max(2 * MIB, self.limit_bytes // 16)
        with open(self.image, "wb") as handle:
            handle.truncate(size)
        self.mount_source.mkdir()
        owner = "{}:{}".format(*SANDBOX_OWNER)
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
              "-E", f"root_owner={owner}", str(self.image)])
        _run(["mount", "-o", "loop,nosuid,nodev,noexec", str(self.image), str(self.mount_source)])
        self.mounted = True
        with contextlib.suppress(OSError):
            (self.mount_source / "lost+found").rmdir()
        self.baseline = self._used_bytes()

    def _used_bytes(self) -> int:
        info = os.statvfs(self.mount_source)
        return (info.f_blocks - info.f_bfree) * info.f_frsize

    def exceeded(self) -> bool:
        info = os.statvfs(self.mount_source)
        full = info.f_bavail * info.f_frsize < FULL_SLACK_BYTES
        return (full or self._used_bytes() - self.baseline > self.limit_bytes
                or compute_usage(self.mount_source) > self.limit_bytes)

    def close(self) -> None:
        """Copy the output out (nothing when over the bound), unmount and delete the image, even
        when the copy fails.

        Every way out of a run comes through here, so the teardown never depends on the flag
        alone (an exception between the mount and the flag, e.g. the worker's SIGTERM, left it
        unset) and never gives up at a busy mount: a `umount` refused as busy (a host process
        inside the folder) is retried, then done lazily (the mount leaves the namespace at once,
        the loop device is freed with its last user). The image is deleted only once nothing is
        mounted there: deleting it under a live mount (what the run folder's removal did after
        a refused umount) left the mount and a loop device backed by a deleted file.

        Raises:
            SandboxPlatformError: the folder is still mounted after the lazy unmount.
        """
        try:
            if self.mounted and not self.exceeded():
                copy_regular_tree(self.mount_source, self.dest, self.limit_bytes)
        finally:
            if self.mounted or os.path.ismount(self.mount_source):
                try:
                    _unmount(self.mount_source)
                except BaseException:
                    # Interrupted (SIGTERM's `WorkerStopped` may kill the umount half-way):
                    # detach it before the caller removes the run folder through it.
                    if os.path.ismount(self.mount_source):
                        _try(["umount", "-l", str(self.mount_source)])
                    raise
            self.mounted = False
            remove_tree(self.workdir)


def _unmount(point: Path) -> None:
    """Unmount `point`: plainly (a few tries while it is busy), else lazily; raises
    SandboxPlatformError only when it is still mounted after that."""
    failure = ""
    for pause in UMOUNT_RETRY_S:
        refused = _try(["umount", str(point)])
        if refused is None or not os.path.ismount(point):
            return
        failure = refused
        time.sleep(pause)
    log.warning("run.sandbox.output_umount_busy", extra={"mount": str(point),
                                                         "error": failure[:300]})
    lazy = _try(["umount", "-l", str(point)])
    if lazy is not None and os.path.ismount(point):
        raise _platform_error(["umount", "-l", str(point)], lazy)


def _try(command: list[str]) -> str | None:
    """Run `command`; None when it succeeded, else what it said."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return None
    return f"exited {done.returncode}: {done.stderr.strip()[:500]}"


def _run(command: list[str]) -> None:
    failure = _try(command)
    if failure is not None:
        raise _platform_error(command, failure)


def _platform_error(command: list[str], failure: str) -> SandboxPlatformError:
    return SandboxPlatformError(
        f"bounded output folder: {' '.join(command)!r} {failure}; expected success (root, "
        "loop devices, mkfs.ext4); fix the host or run the worker with the 'watchdog' output "
        "mechanism")
