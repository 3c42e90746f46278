"""CPU time and peak memory of one sandbox container, whole process tree, from its cgroup
(issue 38.6; DOMjudge's runguard records both for every run).

The container's own cgroup is deleted the moment its last process exits, before the driver can
read it, and the engine's stats API answers zeros once it has stopped. So the driver starts the
container under a parent cgroup of its own (`cgroup_parent`, with the engine's cgroupfs driver):
the parent's counters are hierarchical and outlive the child — cgroup v1's
`memory.max_usage_in_bytes` and `cpuacct.usage`, v2's `memory.peak` and `cpu.stat`'s
`usage_usec` — so they are read after the exit, then the parent is removed. With the systemd
cgroup driver (slices only) the usage reads None: nothing is guessed.
"""

from __future__ import annotations

import errno
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "arena-usage"
"""Top folder of the per-container parents, under each controller's root."""


@dataclass(frozen=True)
class Usage:
    cpu_s: float | None = None
    peak_memory_mb: float | None = None


def usage_parent(client: Any) -> str | None:
    """A fresh `cgroup_parent` to start one container under, or None when the engine's cgroup
    driver is not cgroupfs (or the engine does not say)."""
    try:
        driver = client.info().get("CgroupDriver")
    except Exception:  # noqa: BLE001 - no usage is better than no run
        return None
    if driver != "cgroupfs":
        return None
    # Random, never the container's name: a v1 container reads its cgroup path in
    # /proc/self/cgroup, and the name carries the run's id and fencing token.
    return f"/{PARENT}/{uuid.uuid4().hex}"


def groups(parent: str, root: Path) -> list[Path]:
    """Every folder `parent` has: one per v1 controller, or the one of the unified tree."""
    relative = parent.strip("/")
    if (root / "cgroup.controllers").exists():  # cgroup v2 mounted at the root
        return [root / relative]
    return [path / relative for path in sorted(root.iterdir())
            if path.is_dir() and not path.is_symlink() and (path / relative).is_dir()]


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_stat_usec(path: Path) -> int | None:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def read_usage(parent: str | None, root: Path = CGROUP_ROOT) -> Usage:
    """The parent cgroup's CPU time and peak memory (None for what it does not hold)."""
    if parent is None:
        return Usage()
    cpu_ns: int | None = None
    peak: int | None = None
    for group in groups(parent, root):
        peak = peak or _read_int(group / "memory.max_usage_in_bytes") \
            or _read_int(group / "memory.peak")
        cpu_ns = cpu_ns or _read_int(group / "cpuacct.usage")
        if cpu_ns is None:
            usec = _cpu_stat_usec(group / "cpu.stat")
            cpu_ns = None if usec is None else usec * 1000
    return Usage(cpu_s=None if cpu_ns is None else round(cpu_ns / 1e9, 3),
                 peak_memory_mb=None if peak is None else round(peak / 2**20, 1))


REMOVE_TRIES = 8
"""Tries to remove a parent cgroup still busy, 0.1 s more apart each (~2.8 s in all)."""


def remove_parent(parent: str | None, root: Path = CGROUP_ROOT) -> None:
    """Remove the (empty, once the container is gone) parent cgroup from every controller."""
    if parent is None:
        return
    for group in groups(parent, root):
        for attempt in range(REMOVE_TRIES):
            try:
                os.rmdir(group)
                break
            except OSError as error:
                # EBUSY: the engine may still be removing the container's own cgroup below it
                # (seen on a loaded host right after the container ended).
                if error.errno == errno.EBUSY and attempt + 1 < REMOVE_TRIES:
                    time.sleep(0.1 * (attempt + 1))
                    continue
                # a leftover costs a folder, not a run
                log.warning("run.sandbox.usage_cgroup_left", extra={"cgroup": str(group),
                                                                    "error": repr(error)})
                break
