"""The sandbox driver: run one command in a locked-down container and report what happened.

This module is the only place that starts participant code on the platform. It owns every limit
(through `build_container_kwargs`), the wall clock, the capped log capture and the bounded output
folder, and it always removes the container. It returns a `SandboxResult` of facts; choosing the
run's state (`out_of_memory`, `time_limit`, ...) is the caller's job. Engine or host failures raise
`SandboxPlatformError` so the worker can retry without charging the participant.

Usage::

    result = run_sandbox(docker.from_env(), SandboxSpec(image=..., command=[...], ...), limits)
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import requests

import docker
from worker.live_tail import LiveTail
from worker.output_walk import shape_bound
from worker.sandbox_clock import LimitHit, RunClock, limit_hit
from worker.sandbox_config import SandboxLimits, SandboxSpec, build_container_kwargs
from worker.sandbox_events import EngineWatch
from worker.sandbox_kill import KILL_ATTEMPTS, kill_container
from worker.sandbox_output import OutputArea, open_output_area
from worker.sandbox_result import SandboxPlatformError, SandboxResult
from worker.sandbox_streams import LogPump
from worker.sandbox_usage import read_usage, remove_parent, usage_parent

__all__ = ["SandboxLimits", "SandboxPlatformError", "SandboxResult", "SandboxSpec",
           "build_container_kwargs", "run_sandbox"]

log = logging.getLogger(__name__)
POLL_S = 0.25
STOP_GRACE_S = 30.0  # how long a killed container may take to be reported as exited
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def run_sandbox(client: docker.DockerClient, spec: SandboxSpec, limits: SandboxLimits,
                output_mechanism: str = "auto",
                cancel: threading.Event | None = None,
                live_tail: LiveTail | None = None) -> SandboxResult:
    """Run `spec.command` in a fresh container under `limits`; the container is always removed.

    Args:
        client: a Docker client (e.g. `docker.from_env()`), reused across runs.
        spec: image, command and host folders; `spec.output_dir` receives what the run wrote.
        limits: every bound of the run.
        output_mechanism: how /output is bounded: 'auto', 'loop' or 'watchdog'
            (see worker.sandbox_output).
        cancel: when set during the run, the container is killed and the result says `cancelled`
            (e.g. the lease was lost). A kill from outside (`docker kill`) raises instead.
        live_tail: receives every chunk of output as it arrives (the heartbeat's log tail).
    Returns:
        The facts of the run.
    Raises:
        SandboxPlatformError: the engine or the host failed, or someone outside the driver
            killed the container (retry; not the participant's fault).
    """
    try:
        with open_output_area(spec.output_dir, limits.output_mb, output_mechanism) as area:
            return _run_in_area(client, spec, limits, area, cancel or threading.Event(),
                                live_tail)
    except ENGINE_ERRORS as error:
        raise SandboxPlatformError(
            f"sandbox platform failure running {spec.image!r}: {type(error).__name__}: {error}; "
            "expected a reachable Docker engine with this image (scripts/ensure_docker.sh, "
            "scripts/build_sandbox_image.sh); the run should be retried",
            short_cause=_short_cause(spec.image, error)) from error


def _short_cause(image: str, error: BaseException) -> str:
    """The participant's line for an engine failure (no URLs, paths or operator scripts)."""
    if isinstance(error, docker.errors.ImageNotFound) or "No such image" in str(error):
        return f"the sandbox image {image!r} is not available on the worker that took this run"
    return f"the worker's Docker engine failed ({type(error).__name__})"


def _run_in_area(client: docker.DockerClient, spec: SandboxSpec, limits: SandboxLimits,
                 area: OutputArea, cancel: threading.Event,
                 live_tail: LiveTail | None = None) -> SandboxResult:
    kwargs = build_container_kwargs(spec, limits, output_source=area.mount_source)
    # A parent cgroup whose counters outlive the container: its CPU time and peak (issue 38.6).
    parent = None if "cgroup_parent" in kwargs else usage_parent(client)
    if parent is not None:
        kwargs["cgroup_parent"] = parent
    container = client.containers.create(**kwargs)
    watch: EngineWatch | None = None
    try:
        watch = EngineWatch(client, container.id)
        frames = client.api.attach(container.id, stdout=True, stderr=True, stream=True,
                                   logs=False, demux=True)
        pump = LogPump(frames, limits.log_cap_bytes, live_tail)
        pump.start()
        started_at = time.time()
        container.start()
        # The clock starts once the engine says the process runs: start-up is not charged.
        started = time.monotonic()
        exited = _watch_exit(container)
        log.info("run.sandbox.started", extra={"container": container.id, "image": spec.image})
        clock = RunClock(parent)
        outcome = _wait(container, limits, area, started, cancel, exited, clock)
        wall_time_s = time.monotonic() - started
        pump.join(STOP_GRACE_S)
        if pump.error is not None:
            log.warning("run.sandbox.log_stream_error", extra={"error": repr(pump.error)})
        watch.settle()
        state = container.attrs["State"]
        oom = _is_oom(state, watch)
        _check_not_killed_from_outside(container, outcome, watch, oom)
        exceeded = outcome["output_exceeded"] or area.exceeded()
        detail = shape_bound(area.mount_source) if exceeded else None
        usage = read_usage(parent)
        hit = outcome["limit"]
        if hit is LimitHit.BACKSTOP:
            log.warning("run.sandbox.host_starved", extra={
                "container": container.id, "wall_time_s": round(wall_time_s, 1),
                "cpu_s": usage.cpu_s, "stall_s": clock.stall_s()})
        return SandboxResult(
            exit_code=state.get("ExitCode"),
            oom_killed=oom,
            timed_out=hit in (LimitHit.CPU, LimitHit.WALL),
            host_starved=hit is LimitHit.BACKSTOP, limit_hit=None if hit is None else str(hit),
            stall_s=clock.stall_s(),
            wall_time_s=wall_time_s,
            stdout=pump.stdout.text(), stderr=pump.stderr.text(),
            stdout_truncated=pump.stdout.truncated, stderr_truncated=pump.stderr.truncated,
            output_exceeded=exceeded, cancelled=outcome["cancelled"], output_detail=detail,
            cpu_s=usage.cpu_s, peak_memory_mb=usage.peak_memory_mb, started_at=started_at)
    finally:
        if watch is not None:
            watch.close()
        _remove(container)
        remove_parent(parent)


def _watch_exit(container: Any) -> threading.Event:
    """An event set as soon as the engine reports the container's exit (a blocking `wait` in a
    daemon thread), so that the driver need not learn of it one poll later.

    Polling alone cost up to POLL_S (0.25 s) per run between the exit and the result
    (benchmarks/bench_platform_overhead.py). If the wait itself fails, the event stays unset
    and the poll loop still sees the exit, as before.
    """
    exited = threading.Event()

    def watch() -> None:
        try:
            container.wait()
        except Exception:  # noqa: BLE001 - an engine hiccup: polling still sees the exit
            return
        exited.set()

    threading.Thread(target=watch, name="arena-sandbox-exit", daemon=True).start()
    return exited


def _wait(container: Any, limits: SandboxLimits, area: OutputArea, started: float,
          cancel: threading.Event, exited: threading.Event,
          clock: RunClock | None = None) -> dict[str, Any]:
    """Poll until the container exits; kill it on a time bound (`sandbox_clock.limit_hit`:
    CPU time, the charged wall clock, the backstop), output excess or cancel.

    Each pause ends early when `exited` is set; a cancel is seen within POLL_S.
    """
    clock = clock or RunClock(None)
    outcome: dict[str, Any] = {"limit": None, "output_exceeded": False, "cancelled": False,
                               "killed": False}
    while True:
        container.reload()
        if container.status in ("exited", "dead"):
            return outcome
        if cancel.is_set():
            outcome["cancelled"] = True
        elif hit := limit_hit(limits.wall_time_s, limits.cpu_time_s, limits.backstop_s,
                              time.monotonic() - started, clock.cpu_s(), clock.stall_s()):
            outcome["limit"] = hit
        elif area.live_check and area.exceeded():
            outcome["output_exceeded"] = True
        if outcome["cancelled"] or outcome["limit"] or outcome["output_exceeded"]:
            outcome["killed"] = True
            _kill(container, charged=not outcome["cancelled"]
                  and outcome["limit"] is not LimitHit.BACKSTOP)
            return outcome
        if exited.is_set():  # the engine's inspect may lag its wait answer by a moment
            time.sleep(0.005)
        else:
            exited.wait(POLL_S)


def _kill(container: Any, charged: bool) -> None:
    """SIGKILL the container and wait, bounded, until the engine reports it exited.

    When the kill is for a bound the participant hit (`charged`), a container the engine cannot
    end is logged and the run still ends as theirs: their behaviour (a fork bomb) is what
    stalls the engine, and a retry would only spend the phase's limits again (issue 13).

    Raises:
        SandboxPlatformError: a cancelled run's container did not exit.
    """
    if kill_container(container, STOP_GRACE_S):
        return
    detail = (f"container {container.id[:12]} still {container.status!r} after SIGKILL "
              f"({KILL_ATTEMPTS} engine attempts, then its cgroup); check the Docker engine")
    if charged:
        log.error("run.sandbox.unkillable", extra={"container": container.id, "error": detail})
        return
    raise SandboxPlatformError(detail, short_cause="the sandbox could not be stopped")


def _is_oom(state: dict[str, Any], watch: EngineWatch) -> bool:
    """The engine's OOMKilled flag, or its `oom` event for this container.

    A SIGKILL with neither is not read as out of memory any more: it is the participant's own
    kill, or one from outside (see `_check_not_killed_from_outside`).
    """
    return bool(state.get("OOMKilled")) or watch.oom


def _check_not_killed_from_outside(container: Any, outcome: dict[str, bool], watch: EngineWatch,
                                   oom: bool) -> None:
    """Raise SandboxPlatformError when someone else asked the engine to kill the container.

    A `docker kill` (or stop, or forced removal) by an operator or a host tool is no fault of
    the participant's: the run is retried, uncharged (issue 13 had it charged as OOM).
    """
    if outcome["killed"] or oom or not watch.kill_signals:
        return
    raise SandboxPlatformError(
        f"container {container.id[:12]} was killed from outside the driver (engine kill "
        f"events, signals {watch.kill_signals}); expected only the driver to stop sandboxes: "
        "look for an operator command, a reaper or a daemon restart on this host",
        short_cause="the run was stopped from outside the sandbox on its worker")


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except ENGINE_ERRORS as error:
        # A leaked container keeps its limits and its label; the reaper removes it later.
        log.error("run.sandbox.remove_failed",
                  extra={"container": container.id, "error": repr(error)})
