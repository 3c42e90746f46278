"""What a killed worker leaves behind, swept when the next worker starts on the same data folder.

A worker killed mid-run (SIGKILL, OOM, host reboot) cannot clean up: its run folder (hundreds of
MB, including the answers it kept, `answers/query_labels.npy`), the loop-mounted image of its
bounded output, and the sandbox container (still running, with nobody enforcing its clock) stay.
The run itself is retried elsewhere under a new lease; these are only litter, but litter that
holds labels, disk and a loop device (issue 13). So a starting worker sweeps, before it takes
any job:
- its deployment's sandbox containers (name `arena-<deployment>-run-...`, sandbox label) whose
  mounts come from this worker's run folder: an orphan of this data folder, never a container
  of another deployment or of another data folder on the same engine;
- mounts and loop devices whose mount point or backing file lies under the run folder;
- every `run-*` folder under it.

Several worker processes may share one data folder (replicas on one host). Each holds a shared
lock on `runs/.lock` for its whole life; only a worker that can take it exclusively (nobody
else alive there) sweeps, then keeps it shared like the others.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)
SANDBOX_LABEL = "org.metadl-arena.role=sandbox"
RUN_FOLDER_GLOB = "run-*"
MOUNTINFO = Path("/proc/self/mountinfo")
LOOP_SYSFS = Path("/sys/block")


@dataclass
class SweepReport:
    """What one sweep removed (for the start-up log line and for tests)."""

    swept: bool = False
    containers: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    loop_devices: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)


def hold_runs_lock(runs_dir: Path) -> tuple[IO[bytes], bool]:
    """Open and lock `runs_dir/.lock`: (the handle to keep open for the process's life, whether
    the lock was exclusive, i.e. no other live worker uses this folder)."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    handle = open(runs_dir / ".lock", "ab")  # noqa: SIM115 - held for the process's whole life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return handle, True
    except BlockingIOError:
        fcntl.flock(handle, fcntl.LOCK_SH)
        return handle, False


def release_to_shared(handle: IO[bytes]) -> None:
    """Downgrade the exclusive lock, so that replicas starting later may join (and not sweep)."""
    fcntl.flock(handle, fcntl.LOCK_SH)


def sweep_orphans(docker_client: Any | None, deployment: str, runs_dir: Path) -> SweepReport:
    """Remove this data folder's orphan containers, mounts, loop devices and run folders.

    The caller must hold the exclusive lock from `hold_runs_lock`. Each removal that fails is
    logged and skipped: a sweep never stops a worker from starting.
    """
    runs_dir = runs_dir.resolve()
    report = SweepReport(swept=True)
    if docker_client is not None:
        report.containers = remove_orphan_containers(docker_client, deployment, runs_dir)
    report.mounts = unmount_under(runs_dir)
    report.loop_devices = detach_loops_under(runs_dir)
    mounted = set(mounts_under(runs_dir))
    for folder in sorted(runs_dir.glob(RUN_FOLDER_GLOB)):
        if any(Path(point).is_relative_to(folder) for point in mounted):
            log.error("worker.sweep.still_mounted", extra={"folder": str(folder)})
            continue  # never delete through a mount: it would empty what is mounted there
        shutil.rmtree(folder, ignore_errors=True)
        report.folders.append(folder.name)
    swept = report.containers or report.mounts or report.loop_devices or report.folders
    # Nothing left behind is the normal start: say it only at DEBUG.
    log.log(logging.WARNING if swept else logging.DEBUG, "worker.sweep.done",
            extra={"containers": len(report.containers), "mounts": len(report.mounts),
                   "loop_devices": len(report.loop_devices), "folders": len(report.folders)})
    return report


def remove_orphan_containers(docker_client: Any, deployment: str, runs_dir: Path) -> list[str]:
    """Force-remove sandbox containers of `deployment` that mount something from `runs_dir`."""
    prefix = f"arena-{deployment}-run-"
    removed = []
    # ignore_removed: the list holds every sandbox on the host (other workers', other test
    # processes'); one removed between the list and its inspection is gone, not an error (it
    # failed the whole sweep with a 404 at load 35).
    for container in docker_client.containers.list(all=True, filters={"label": SANDBOX_LABEL},
                                                   ignore_removed=True):
        if not container.name.startswith(prefix):
            continue
        sources = [m.get("Source", "") for m in container.attrs.get("Mounts") or []]
        if not any(source and Path(source).is_relative_to(runs_dir) for source in sources):
            continue
        try:
            container.remove(force=True)
            removed.append(container.name)
        except Exception as exc:  # noqa: BLE001 - gone meanwhile, or the engine refuses
            log.warning("worker.sweep.container_failed",
                        extra={"container": container.name, "error": repr(exc)})
    return removed


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below `root`, deepest first (the order to unmount them in)."""
    points = []
    with contextlib.suppress(OSError):
        for line in MOUNTINFO.read_text().splitlines():
            point = _unescape(line.split()[4])
            if Path(point).is_relative_to(root):
                points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def unmount_under(root: Path) -> list[str]:
    """Unmount (lazily if busy) every mount below `root`; returns the mount points released."""
    released = []
    for point in mounts_under(root):
        if point == str(root):
            continue  # the data folder itself may be a (bind) mount: not ours to undo
        done = _run(["umount", point]) or _run(["umount", "-l", point])
        if done:
            released.append(point)
    return released


def detach_loop_devices_for(root: Path) -> list[str]:
    """Loop devices whose backing file lies under `root` (e.g. a dead run's output image)."""
    devices = []
    for backing in LOOP_SYSFS.glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            path = backing.read_text().strip().removesuffix(" (deleted)")
            if path and Path(path).is_relative_to(root):
                devices.append(f"/dev/{backing.parent.parent.name}")
    return devices


def detach_loops_under(root: Path) -> list[str]:
    """Detach the loop devices `detach_loop_devices_for` finds; returns those detached."""
    return [device for device in detach_loop_devices_for(root) if _run(["losetup", "-d", device])]


def _unescape(field_text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040 ...)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field_text = field_text.replace(code, char)
    return field_text


def _run(command: list[str]) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("worker.sweep.command_failed", extra={"command": command, "error": repr(exc)})
        return False
    if done.returncode != 0:
        log.warning("worker.sweep.command_failed",
                    extra={"command": command, "error": done.stderr.strip()[:300]})
    return done.returncode == 0


def sweep_at_start(settings: Any) -> IO[bytes]:
    """Take this worker's lock on its run folder and, when no other live worker shares the
    folder, sweep what dead ones left. Keep the returned handle open while the worker lives.

    Args:
        settings: the worker's `WorkerSettings`.
    """
    from worker.pipeline.execute import compute_deployment_id
    from worker.pipeline.wiring import connect_docker

    handle, exclusive = hold_runs_lock(settings.runs_dir)
    if not exclusive:
        log.info("worker.sweep.skipped", extra={"reason": "another live worker uses this folder",
                                                "runs_dir": str(settings.runs_dir)})
        return handle
    try:
        client = connect_docker() if settings.executor != "local" else None
        sweep_orphans(client, compute_deployment_id(settings.server_url), settings.runs_dir)
    except Exception:  # noqa: BLE001 - litter must never stop a worker from starting
        log.exception("worker.sweep.failed")
    finally:
        release_to_shared(handle)
    return handle
