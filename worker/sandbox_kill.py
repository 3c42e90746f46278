"""Ending a sandbox container that must stop now, even when the engine struggles to.

Under a fork bomb the host is so loaded that `docker kill` may answer 500 "did not receive an
exit event" although the signal went out, or the exit may take long to be reported (issue 13).
So the driver tries the engine a few times, waiting a little after each answer, and then goes
under it: it freezes the container's cgroup (no process can fork or run any more), SIGKILLs every
process in it and thaws it, as `docker kill` would have. That needs the worker on the host, with
root; elsewhere only the engine's way is tried. The caller decides what a failure means.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import docker

log = logging.getLogger(__name__)
KILL_ATTEMPTS = 3
KILL_WAIT_S = 5.0  # after each kill request, how long the exit may take to be reported
POLL_S = 0.25
CGROUP_ROOT = Path("/sys/fs/cgroup")


def kill_container(container: Any, grace_s: float) -> bool:
    """SIGKILL `container` until the engine reports it exited; True when it did within the
    attempts plus `grace_s`."""
    for attempt in range(1, KILL_ATTEMPTS + 1):
        try:
            container.kill()
        except docker.errors.NotFound:
            return True
        except docker.errors.APIError as error:
            if error.status_code != 409:  # 409: it exited on its own meanwhile
                log.warning("run.sandbox.kill_failed",
                            extra={"container": container.id[:12], "attempt": attempt,
                                   "error": str(error)[:300]})
        if wait_exited(container, KILL_WAIT_S):
            return True
    pid = int((container.attrs.get("State") or {}).get("Pid") or 0)
    if pid > 0 and kill_cgroup_of(pid):
        log.warning("run.sandbox.cgroup_killed", extra={"container": container.id[:12]})
    return wait_exited(container, grace_s)


def wait_exited(container: Any, timeout_s: float) -> bool:
    """Poll the engine until the container is exited (or gone); False after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            container.reload()
        except docker.errors.NotFound:
            return True
        if container.status in ("exited", "dead"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def kill_cgroup_of(pid: int) -> bool:
    """Freeze, SIGKILL and thaw every process of the cgroup that `pid` (a container's init, as
    seen from the host) belongs to; False when this process cannot (not on the host, no root)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    paths = dict(_controller_paths(lines))
    if "freezer" in paths and "pids" in paths:  # cgroup v1 (or hybrid: v1 holds the tasks)
        return _kill_v1(CGROUP_ROOT / "freezer" / paths["freezer"].lstrip("/"),
                        CGROUP_ROOT / "pids" / paths["pids"].lstrip("/"))
    if "" in paths:  # cgroup v2: one unified tree, with a kill switch since Linux 5.14
        return _kill_v2(CGROUP_ROOT / paths[""].lstrip("/"))
    return False


def _controller_paths(lines: list[str]) -> list[tuple[str, str]]:
    """(controller, path) pairs of /proc/PID/cgroup; v2's unified line gives controller ''."""
    pairs = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            pairs.append((controller, path))
    return pairs


def _kill_v2(group: Path) -> bool:
    try:
        if (group / "cgroup.kill").exists():
            (group / "cgroup.kill").write_text("1")
            return True
        (group / "cgroup.freeze").write_text("1")
        try:
            _kill_all(group / "cgroup.procs")
        finally:
            (group / "cgroup.freeze").write_text("0")
        return True
    except OSError:
        return False


def _kill_v1(freezer: Path, pids: Path) -> bool:
    try:
        (freezer / "freezer.state").write_text("FROZEN")
        try:
            _kill_all(pids / "cgroup.procs")
        finally:
            (freezer / "freezer.state").write_text("THAWED")
        return True
    except OSError:
        return False


def _kill_all(procs: Path) -> None:
    for line in procs.read_text().split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(line), signal.SIGKILL)
