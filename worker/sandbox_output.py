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
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from worker.output_walk import compute_usage, copy_regular_tree, remove_tree
from worker.sandbox_result import SandboxPlatformError

log = logging.getLogger(__name__)
MIB = 1024 * 1024
FULL_SLACK_BYTES = 64 * 1024  # below this much free space, a write has (nearly) hit the bound
SANDBOX_OWNER = (1000, 1000)


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
        when the copy fails."""
        try:
            if self.mounted and not self.exceeded():
                copy_regular_tree(self.mount_source, self.dest, self.limit_bytes)
        finally:
            if self.mounted:
                _run(["umount", str(self.mount_source)])
                self.mounted = False
            remove_tree(self.workdir)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SandboxPlatformError(
            f"bounded output folder: {' '.join(command)!r} exited {done.returncode}: "
            f"{done.stderr.strip()[:500]}; expected success (root, loop devices, mkfs.ext4); "
            "fix the host or run the worker with the 'watchdog' output mechanism")
