"""The worker's shared read-only copy of a sandbox image's folders for the per-task root (issue 38).

Why: without it every meta-test run copied the image's folders onto its own tmpfs before its
first task (`runner/task_root.py`): 4-5 s and ~290 MB per run, charged to the participant. Here
the worker, as root on its host, makes that copy once per (image id, platform code) on a host
tmpfs of its own (`BASE/<key>`), in a short trusted container of the image running the same
copy code as the sandbox user (`runner/task_root_shared.make`), then chowns it to root and
remounts the tmpfs read-only; every meta-test container gets it bound read-only at
`task_root_shared.TARGET`, and its supervisor uses it where its marker matches the run.

Its memory is the host's, not a run's: the maker container's cgroup is charged while it copies,
and its pages go to the parent cgroup (Docker's) when the maker ends; at most `KEEP` copies
stay (the oldest are detached when a new one is made). Two slots making the same copy at once:
the second waits on the first's `flock`. Where the worker is not root or cannot mount a tmpfs,
`for_image` returns None and each run copies for itself, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from submission_api.runner.task_root_shared import MARKER, TARGET
from worker.sandbox_config import (
    CODE_TARGET,
    CONTAINER_LABELS,
    SANDBOX_GID,
    SANDBOX_UID,
    default_code_dir,
)
from worker.shutdown import WorkerStopped

log = logging.getLogger(__name__)
BASE = Path(os.environ.get("ARENA_TASK_ROOT_BASE", "/run/metadl-arena/task-roots"))
SIZE_MB = 4096
"""The host tmpfs's bound (a bound, not a reservation: the copy is ~290 MB)."""
KEEP = 3
IN_USE_S = 120.0
"""A copy handed out this recently is not pruned: its run may be creating its container."""
MAKE_INTO = "/run/arena-root-make"
MAKE_TIMEOUT_S = 300
"""The maker copies in ~5-12 s; a hung one must not hold every slot's lock."""


def code_digest(code_dir: Path) -> str:
    """Names, sizes and mtimes of the platform's code (the copy holds it; `__pycache__` aside)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(code_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(root, name))
                digest.update(f"{os.path.join(root, name)}:{info.st_size}:"
                              f"{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


def _mounted(folder: Path) -> bool:
    return os.path.ismount(folder)


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def _detach(folder: Path) -> None:
    """Unmount (lazily: a running container keeps its own bind) and remove one copy."""
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        if _mounted(folder):
            _run("umount", "-l", str(folder))
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        Path(f"{folder}.lock").unlink()


def _prune(base: Path, keep: Path) -> None:
    """At most `KEEP` copies: the least recently used go (an image change leaves old ones),
    never one handed out in the last `IN_USE_S` nor one a slot's run has pinned (`_pin`)."""
    def used(path: Path) -> float:
        with contextlib.suppress(OSError):
            return Path(f"{path}.lock").stat().st_mtime
        return 0.0

    copies = sorted((p for p in base.iterdir() if p.is_dir() and p != keep), key=used)
    excess = len(copies) - (KEEP - 1)
    for old in copies:
        if excess <= 0:
            break
        if time.time() - used(old) <= IN_USE_S:
            continue
        with open(f"{old}.users", "a") as users:
            try:  # a slot's run pins it (`_pin`) from its hand-out to the slot's next run
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            _detach(old)
            excess -= 1


_PINS: dict[int, int] = {}
"""Per slot (thread), the shared lock on the copy its current run was handed."""


def _pin(folder: Path) -> None:
    """Keep `folder` from `_prune` while this slot's run may bind it: a run outlives
    `IN_USE_S` (meta-train first), and another image's or code's worker pruned its copy before
    the meta-test container bound it ("bind source path does not exist"). Held until the
    slot's next hand-out, so a slot pins one copy at most."""
    fd = os.open(f"{folder}.users", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)  # waits out a prune under way: then the copy is made again
    old = _PINS.pop(threading.get_ident(), None)
    _PINS[threading.get_ident()] = fd
    if old is not None:
        os.close(old)


def make(client: Any, image: str, folder: Path, code: Path,
         places: tuple[str, ...]) -> None:
    """Mount the tmpfs, copy into it from a trusted container of `image`, seal it."""
    folder.mkdir(parents=True, exist_ok=True)
    if not _mounted(folder):
        _run("mount", "-t", "tmpfs", "-o",
             f"size={SIZE_MB}m,mode=0755,uid={SANDBOX_UID},gid={SANDBOX_GID},nosuid,nodev",
             "arena-task-root", str(folder))
    from docker.types import Mount

    command = ["python3", "-m", "submission_api.runner.task_root_shared", "--into", MAKE_INTO,
               *(a for p in places for a in ("--place", p))]
    container = client.containers.run(
        image, command, user=f"{SANDBOX_UID}:{SANDBOX_GID}", network_mode="none",
        read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges:true"],
        environment={"PYTHONPATH": CODE_TARGET}, hostname="sandbox", working_dir="/tmp",
        mounts=[Mount(f"{CODE_TARGET}/submission_api", str(code), type="bind", read_only=True),
                Mount(MAKE_INTO, str(folder), type="bind")],
        labels={**CONTAINER_LABELS, "org.metadl-arena.purpose": "task-root"}, detach=True)
    try:
        status = container.wait(timeout=MAKE_TIMEOUT_S)
        if status.get("StatusCode") != 0:
            raise RuntimeError(f"the copy's maker exited {status}: "
                               f"{container.logs(tail=20).decode(errors='replace')}")
    finally:
        container.remove(force=True)
    _run("chown", "-R", "-h", "0:0", str(folder))
    _run("mount", "-o", "remount,ro,nosuid,nodev", str(folder))


def for_image(client: Any, image: str, places: tuple[str, ...],
              code_dir: Path | None = None, base: Path | None = None) -> Path | None:
    """The host folder of the shared copy for `image` (made now if need be), or None where
    this worker cannot make one (not root, no tmpfs, the maker failed: logged)."""
    if os.geteuid() != 0:
        return None
    base = base or BASE
    code = code_dir or default_code_dir()
    try:
        image_id = str(client.images.get(image).id).removeprefix("sha256:")
        key = f"{image_id[:12]}-{code_digest(code)}"
        folder = base / key
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(f"{folder}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another slot may be making it now
            os.utime(lock.fileno())
            _pin(folder)
            if not (_mounted(folder) and (folder / MARKER).is_file()
                    and os.statvfs(folder).f_flag & os.ST_RDONLY):  # else half-made
                began = time.monotonic()
                _detach_half_made(folder)
                make(client, image, folder, code, places)
                _prune(base, folder)
                log.info("worker.task_root.made", extra={
                    "image": image, "key": key, "seconds": round(time.monotonic() - began, 2),
                    "marker": json.loads((folder / MARKER).read_text()).get("folder")})
        return folder
    except WorkerStopped:
        raise  # the operator's stop: the run is released, not carried on without the copy
    except Exception as exc:  # noqa: BLE001 - the host's: runs copy for themselves instead
        log.warning("worker.task_root.not_made", extra={"image": image, "error": repr(exc)})
        return None


def _detach_half_made(folder: Path) -> None:
    if _mounted(folder):  # an earlier maker died half-way: start again
        _run("umount", "-l", str(folder))


def mount_for(host: Path | None) -> tuple[tuple[Path, str], ...]:
    """The meta-test container's read-only mount of the shared copy (none without one)."""
    return ((host, str(TARGET)),) if host is not None else ()
