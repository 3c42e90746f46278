"""At start-up, whether this worker host gives test tasks their own namespaces (issue 34.4).

A run learns it from its supervisor's probe and says so in its isolation line; a host whose
AppArmor profile denies mount, or whose kernel has no unprivileged user namespaces, would fall
back to shared namespaces for every run. The worker tries the same setup once at start-up, in a
container of the default image under the meta-test profile, and says loudly when it falls back.
What it found is also sent with the worker's claims, heartbeats and pool job requests
(`reported_task_isolation`), so the operators' workers view shows a host that falls back before
any run of it ends.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
PROBE = ("from pathlib import Path; from submission_api.runner import namespaces; "
         "print('task-namespaces', namespaces.probe([Path('/tmp')], []))")
FALLBACK_WARNING = (
    "this worker host refuses test tasks their own namespaces (AppArmor denies mount, or the "
    "kernel has no unprivileged user namespaces): every run here falls back to shared "
    "namespaces swept after each task, and says so in its isolation line. Give the sandbox "
    "security_opt apparmor=unconfined or a profile allowing tmpfs mounts (docs/internals.md)")
_found: dict[str, str] = {}
"""This process's probe result, `own` or `shared`, once it has ended (none when it failed)."""


def reported_task_isolation() -> str | None:
    """What this worker tells the server of its host's test-task isolation (issue 34): `own`,
    `shared` (the fallback), or None while the probe runs or when it could not run."""
    return _found.get("task_isolation")


def probe_task_namespaces(client: Any, image: str, runs_dir: Path, deployment: str,
                          code_dir: Path | None = None, profile: bool = True) -> bool | None:
    """True: tasks get their own namespaces here; False: the shared fallback; None: the probe
    could not run (an engine or image failure: the run's own probe still decides). `profile`
    False: under Docker's default seccomp profile (what a host that refuses ours amounts to;
    tests).

    The probe's container is named and mounted like a run's of this worker (`arena-<deployment>-
    run-probe-...`, its folder a `run-probe-*` one in `runs_dir`): a worker killed while it
    probes leaves it behind like a run's, and the next worker's start-up sweep (worker/sweep.py)
    removes both; the driver removes it whenever the probe ends. An exclusive host hold's sweep
    (`wiring.build_host_lock`) removes it too: a secret run never shares the host with it."""
    from worker.sandbox import SandboxLimits, SandboxPlatformError, SandboxSpec, run_sandbox

    runs_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="run-probe-", dir=runs_dir) as folder:
        suffix = Path(folder).name.removeprefix("run-probe-")
        spec = SandboxSpec(image=image, command=("python3", "-c", PROBE),
                           submission_dir=Path(folder), bundle_dir=None,
                           output_dir=Path(folder) / "output", code_dir=code_dir,
                           task_namespaces=profile, workdir="/tmp",
                           name=f"arena-{deployment}-run-probe-{suffix}")
        try:
            # No loop-mounted output (the probe writes none): a worker stopped while its
            # background probe ran left the mount, and a loop device, behind at every start.
            result = run_sandbox(client, spec, SandboxLimits(memory_mb=512, wall_time_s=120.0),
                                 output_mechanism="watchdog")
        except SandboxPlatformError as error:
            log.warning("worker.isolation_probe_failed", extra={"error": str(error)[:500]})
            return None
    words = result.stdout.split()
    if result.exit_code != 0 or words[:1] != ["task-namespaces"]:
        log.warning("worker.isolation_probe_failed",
                    extra={"exit_code": result.exit_code, "stderr": result.stderr[-500:]})
        return None
    return words[1:2] == ["True"]


def check_host_isolation(client: Any, image: str, runs_dir: Path, deployment: str,
                         code_dir: Path | None = None, profile: bool = True) -> bool | None:
    """`probe_task_namespaces`, logged: a WARNING naming the fallback when tasks would share
    namespaces, an INFO line otherwise."""
    private = probe_task_namespaces(client, image, runs_dir, deployment, code_dir, profile)
    if private is not None:
        _found["task_isolation"] = "own" if private else "shared"
    if private is False:
        log.warning("worker.task_isolation_fallback: %s", FALLBACK_WARNING)
    elif private:
        log.info("worker.task_isolation: own namespaces per test task")
    return private
