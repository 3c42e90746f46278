"""The composition root of the worker process: the real collaborators of `evaluate_run`.

Built lazily, once per pool process (after the fork: HTTP and Docker clients must not cross
it), from settings. Each pool slot owns one GPU, picked by the slot's index in the pool.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from worker.client import InternalClient
from worker.cpu_plan import slot_cpuset
from worker.host_lock import HostLock
from worker.isolation_probe import reported_task_isolation
from worker.pipeline.evaluate import Runtime
from worker.pipeline.execute import (
    ExecutionRequest,
    ExecutionResult,
    Executor,
    compute_deployment_id,
    make_docker_executor,
)
from worker.pipeline.faults import EngineCheck
from worker.settings import WorkerSettings

log = logging.getLogger(__name__)
MAX_REPORTED_IMAGES = 1000
"""The server's bound on a claim's image list (server/schemas/internal.py)."""


def compute_slot_gpus(settings: WorkerSettings, slot: int) -> tuple[str, ...]:
    """The GPU a pool slot owns: slot i gets the i-th configured GPU; none without GPUs."""
    if not settings.gpu_ids:
        return ()
    return (settings.gpu_ids[slot % len(settings.gpu_ids)],)


def parse_protocol(data: Mapping[str, Any]) -> Any:
    """The phase's protocol dict (`ProtocolParams.to_dict` form) as a validated `ProtocolParams`."""
    from submission_api.protocols import ProtocolParams

    return ProtocolParams.from_dict(dict(data))


def connect_docker() -> Any | None:
    """A Docker client whose engine answers, or None."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
        log.info("worker.docker.unreachable", extra={"error": repr(exc)})
        return None


def sync_sandbox_code(target: Path | None) -> Path | None:
    """Copy this worker's `submission_api` into `target/submission_api` (the host-visible copy
    sandboxes mount); None keeps the driver's default, the worker's own package folder.

    Every pool process syncs it when it builds its runtime (and a Celery worker's main process
    before its start-up probe), while other slots' sandboxes may be importing from it: a file
    whose bytes are already there is left alone, and a changed one is written beside it and
    renamed over it, so a reader never sees one truncated or half written."""
    if target is None:
        return None
    import submission_api

    source = Path(submission_api.__file__).resolve().parent
    destination = target / "submission_api"
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        copy = destination / path.relative_to(source)
        if copy.is_file() and copy.read_bytes() == path.read_bytes():
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        temp = copy.with_name(f".{copy.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            shutil.copy2(path, temp)
            os.replace(temp, copy)
        finally:
            temp.unlink(missing_ok=True)
    return destination


def note_ignored_image(execute: Executor) -> Executor:
    """Wrap the unsandboxed local executor so that each run's log says the phase's image was
    not used: the run record must not suggest the phase's environment was honoured."""

    def run(request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        result = execute(request, cancel)
        note = (f"[arena] unsandboxed local mode: this run used the worker's own Python, not "
                f"the phase's sandbox image {request.image!r}.\n")
        return dataclasses.replace(result, stderr=note + result.stderr)

    return run


def make_image_lister(settings: WorkerSettings) -> Callable[[], list[str] | None]:
    """What a claim reports as this worker's images: the tags its Docker engine holds, read
    afresh at each claim (an image may be built or pulled meanwhile); None for the local
    executor or when no engine answers (the server then checks nothing against this worker)."""
    clients: list[Any] = []

    def list_images() -> list[str] | None:
        if settings.executor == "local":
            return None
        if not clients:
            client = connect_docker()
            if client is None:
                return None
            clients.append(client)
        try:
            tags = {tag for image in clients[0].images.list() for tag in image.tags}
        except Exception as exc:  # noqa: BLE001 - a report is optional; the claim goes on
            log.warning("worker.images.unreadable", extra={"error": repr(exc)})
            return None
        return sorted(tags)[:MAX_REPORTED_IMAGES]

    return list_images


def build_executor(settings: WorkerSettings) -> Executor:
    """The sandbox when configured or reachable; the unsandboxed local mode otherwise.

    Raises:
        RuntimeError: `executor="docker"` and no Docker engine answers.
    """
    return build_sandbox(settings)[0]


_ISOLATION_CHECKED = threading.Event()


def _isolation_probe_args(docker_client: Any, settings: WorkerSettings,
                          code_dir: Path | None) -> tuple[Any, ...]:
    """`check_host_isolation`'s arguments: the probe's container is one of this worker's run
    containers to its start-up sweep (its deployment, its folder in the runs folder)."""
    return (docker_client, settings.default_image, settings.runs_dir,
            compute_deployment_id(settings.server_url), code_dir)


def _check_isolation_once(docker_client: Any, settings: WorkerSettings,
                          code_dir: Path | None) -> None:
    """At start-up, in the background: a host that would give runs only the shared fallback
    says so in a WARNING (worker/isolation_probe.py; issue 34.4)."""
    from worker.isolation_probe import check_host_isolation

    if not _ISOLATION_CHECKED.is_set():
        _ISOLATION_CHECKED.set()
        threading.Thread(target=check_host_isolation,
                         args=_isolation_probe_args(docker_client, settings, code_dir),
                         name="arena-isolation-probe", daemon=True).start()


def probe_isolation_when_ready(docker_client: Any, settings: WorkerSettings) -> None:
    """A Celery worker builds its runtime, and with it the probe, on its pool processes' first
    job: an idle worker on a host that falls back would say nothing until then. Its main
    process probes as soon as the worker is ready, in the background (issue 34.4). The code is
    copied here, before the pool forks, so no process writes it while another mounts it."""
    from celery.signals import worker_ready

    from worker.isolation_probe import check_host_isolation

    code_dir = sync_sandbox_code(settings.sandbox_code_dir)

    def on_ready(**_: Any) -> None:
        threading.Thread(target=check_host_isolation,
                         args=_isolation_probe_args(docker_client, settings, code_dir),
                         name="arena-isolation-probe", daemon=True).start()

    worker_ready.connect(on_ready, weak=False)


_DENTRY_RESET_CHECKED = threading.Event()


def _check_dentry_reset_once(settings: WorkerSettings) -> None:
    """At start-up: a host whose runs the dentry-cache reset cannot separate (not root, /proc/sys
    read-only, or concurrent slots) says so in a WARNING (worker/dentry_reset.py; issue 34)."""
    from worker.dentry_reset import check_dentry_reset

    if not _DENTRY_RESET_CHECKED.is_set():
        _DENTRY_RESET_CHECKED.set()
        check_dentry_reset(settings.reset_dentries, settings.pool_size)


def build_sandbox(settings: WorkerSettings) -> tuple[Executor, EngineCheck | None]:
    """`build_executor`'s executor, and the check run before each claim that its Docker engine
    still answers (None for the local executor, which has no engine): an engine that stops
    answering would fail every run this worker took (issue 21).

    Raises:
        RuntimeError: `executor="docker"` and no Docker engine answers.
    """
    from worker.local_executor import make_local_executor

    if settings.executor == "local":
        return note_ignored_image(make_local_executor()), None
    docker_client = connect_docker()
    if docker_client is not None:
        code_dir = sync_sandbox_code(settings.sandbox_code_dir)
        executor = make_docker_executor(docker_client, code_dir, prefault=settings.prefault,
                                        reset_dentries=settings.reset_dentries)
        _check_isolation_once(docker_client, settings, code_dir)
        _check_dentry_reset_once(settings)
        return executor, docker_client.ping
    if settings.executor == "docker":
        raise RuntimeError("ARENA_WORKER_EXECUTOR=docker but no Docker engine answers; start "
                           "one (scripts/ensure_docker.sh) or set ARENA_WORKER_EXECUTOR=auto.")
    return note_ignored_image(make_local_executor()), None


INSTANCE_ENV = "ARENA_WORKER_INSTANCE"


def worker_instance() -> str:
    """This worker process's identity, `host:pid:random`, set once by `run_worker` in the
    main process (pool children inherit it). Part of the lease owner, so two workers started
    with one ARENA_WORKER_NAME never claim under the same owner (issue 32.6: both held runs as
    'gpu-1/0', and each one's calls were taken for the other's)."""
    value = os.environ.get(INSTANCE_ENV)
    if not value:
        value = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        os.environ[INSTANCE_ENV] = value
    return value


def build_runtime(settings: WorkerSettings, slot: int) -> Runtime:
    """Every real collaborator of one pool slot."""
    from submission_api.runner.prepare import prepare_run
    from submission_api.runner.scorer import score_output

    client = InternalClient(settings.server_url, timeout_s=settings.http_timeout_s,
                            attempts=settings.http_attempts, backoff_s=settings.http_backoff_s,
                            list_images=make_image_lister(settings),
                            pool_token=settings.pool_token,
                            task_isolation=reported_task_isolation,
                            host_lock=True)  # every run holds `build_host_lock`'s lock below
    execute, engine_check = build_sandbox(settings)
    return Runtime(
        client=client, execute=execute, engine_check=engine_check, prepare_run=prepare_run,
        parse_protocol=parse_protocol, score_output=score_output,
        worker_name=f"{settings.name}/{slot}@{worker_instance()}", cache_dir=settings.cache_dir,
        runs_dir=settings.runs_dir, gpu_ids=compute_slot_gpus(settings, slot),
        heartbeat_interval_s=settings.heartbeat_interval_s, log_cap_bytes=settings.log_cap_bytes,
        default_image=settings.default_image,
        deployment=compute_deployment_id(settings.server_url),
        cpuset=slot_cpuset(settings, slot), wall_backstop_factor=settings.wall_backstop_factor,
        host_lock=build_host_lock(settings))


def build_host_lock(settings: WorkerSettings) -> HostLock:
    """The host lock every run of this worker holds (`worker.host_lock`). With Docker sandboxes,
    an exclusive hold first removes the sandbox containers of this data folder that a killed
    slot left running (`sweep.remove_orphan_containers`): no live run of this worker holds the
    host then, so none of them is a live run's. Workers sharing one lock path from different
    data folders do not see each other's (each removes its own)."""
    if settings.executor == "local":
        return HostLock(settings.host_lock_path, settings.pool_size)
    deployment, runs_dir = compute_deployment_id(settings.server_url), settings.runs_dir

    def remove_orphans() -> None:
        from worker.sweep import remove_orphan_containers

        client = connect_docker()
        if client is None:
            return  # no engine: the run fails at its start, as the platform's
        removed = remove_orphan_containers(client, deployment, runs_dir.resolve())
        if removed:
            log.warning("run.host_lock.orphans_removed", extra={"containers": removed})

    return HostLock(settings.host_lock_path, settings.pool_size, on_exclusive=remove_orphans)
