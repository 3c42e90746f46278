"""Execute step: run the participant side under the phase's limits while keeping the lease alive.

An executor takes an `ExecutionRequest` (host folders, limits, GPUs) and a cancel event and
returns a fixed `ExecutionResult` record; it decides no verdict (the score step does). Both
executors run the two stages of `submission_api.runner.stages`: meta-train in one sandbox, then
meta-test in a second one that sees the submission and the learner read-only and receives the
test tasks one at a time from a task server in this process (nothing of the tasks is mounted).
Two exist: the Docker sandbox (`make_docker_executor`, the default) and the unsandboxed local
mode (`worker.local_executor`, trusted code only). A `Heartbeat` thread extends the lease for the
whole run; when the server answers 409 the run was taken away, so the heartbeat sets the cancel
event, the executor kills the participant side and nothing is published. Both executors tee
the participant side's output into the request's `live_tail` (worker/live_tail.py), which each
running beat sends as the progress's `log_tail`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from submission_api.contract.resources import RunResources
from submission_api.contract.usage import StageMark, StageUsage
from submission_api.runner.stages import (
    compute_task_seed,
    meta_test_command,
    meta_train_command,
    read_run_info,
    run_meta_test,
)
from submission_api.runner.task_server import PREDICTIONS
from worker.client import ClaimedRun
from worker.live_tail import LiveTail
from worker.pipeline.errors import PlatformFault
from worker.pipeline.progress import PROGRESS_FILE, make_readable
from worker.pipeline.task_times import measure_task_times
from worker.sandbox_clock import LimitHit, StageBudget
from worker.sandbox_result import SandboxResult

log = logging.getLogger(__name__)

CHANNEL_TARGET, LEARNER_TARGET = "/channel", "/learner"
META_TEST_SCRATCH = ("/tmp",)
"""What the supervisor empties after every task (with /dev/shm and IPC, swept by kind)."""


@dataclass(frozen=True)
class ExecutionRequest:
    """One participant-side run: host folders, wall-clock limit and resources."""

    run_id: int
    image: str
    submission_dir: Path
    bundle_dir: Path
    output_dir: Path
    time_limit_s: float
    cpus: float
    memory_mb: int
    gpu_ids: tuple[str, ...] = ()
    log_cap_bytes: int = 64 * 1024
    name: str = ""
    """Container name, so a heartbeat that lost the lease can find the container and kill it."""
    deployment: str = "local"
    """Which deployment (server) the run belongs to; part of the container name."""
    answers_dir: Path | None = None
    """The trusted side's task plan; the meta-test stage's task server reads it."""
    resources: RunResources | None = None
    """The phase's resources: pids, /dev/shm, /tmp, output bounds (None: the defaults, with
    this request's cpus and memory)."""
    live_tail: LiveTail | None = field(default=None, compare=False, repr=False)
    """Where the executor tees the output as it arrives, for the heartbeat (None: nowhere)."""
    wall_backstop_factor: float = 1.0
    """The plain wall clock is cut at `time_limit_s` times this; above 1 the run is charged
    its CPU time and a wall clock that stops while the host starves it (issue 38.3); 1: the
    plain wall clock is the charged one, as before."""
    cpuset: str | None = None
    """The host cores this worker slot owns (`--cpuset-cpus`), None: not pinned."""

    @property
    def budget(self) -> StageBudget:
        """The whole run's time bounds (both stages share them)."""
        if self.wall_backstop_factor <= 1.0:
            return StageBudget(self.time_limit_s)
        return StageBudget(self.time_limit_s, cpu_s=self.time_limit_s * self.cpus,
                           backstop_s=self.time_limit_s * self.wall_backstop_factor)

    @property
    def run_resources(self) -> RunResources:
        """The phase's resources, with this request's cpus and memory."""
        return replace(self.resources or RunResources(), cpus=self.cpus,
                       memory_mb=self.memory_mb)

    @property
    def threads(self) -> int:
        return max(1, int(self.cpus))

    @property
    def learner_dir(self) -> Path:
        return self.output_dir / "learner"

    @property
    def meta_test_output_dir(self) -> Path:
        """The meta-test stage's writable folder: scratch, emptied after every task."""
        return self.output_dir.parent / "meta_test_output"

    @property
    def channel_dir(self) -> Path:
        return self.output_dir.parent / "channel"

    @property
    def task_seed(self) -> int:
        return compute_task_seed(read_run_info(self.bundle_dir))


ExecutionResult = SandboxResult
"""Both executors (sandbox and local mode) end with the sandbox driver's fixed record."""


class Executor(Protocol):
    def __call__(self, request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult: ...


def container_prefix(deployment: str, run_id: int) -> str:
    """Name prefix of every container of one run of one deployment (a server): what a later
    attempt reaps, and nothing of another deployment sharing the Docker engine."""
    return f"arena-{deployment}-run-{run_id}-"


def compute_deployment_id(server_url: str) -> str:
    """A short, stable id of the deployment a worker serves, from its server's URL."""
    return hashlib.sha256(server_url.rstrip("/").encode()).hexdigest()[:8]


def build_request(claimed: ClaimedRun, submission_dir: Path, bundle_dir: Path, output_dir: Path,
                  gpu_ids: tuple[str, ...], log_cap_bytes: int,
                  default_image: str = "metadl-arena/sandbox:cpu",
                  deployment: str = "local", answers_dir: Path | None = None,
                  live_tail: LiveTail | None = None, cpuset: str | None = None,
                  wall_backstop_factor: float = 1.0) -> ExecutionRequest:
    """The execution request of a claimed run on this worker slot (`default_image` when the
    phase names none).

    Raises:
        PlatformFault: the phase needs more GPUs, or more CPUs, than this slot owns (a routing
            mistake: the run is handed back, never squeezed onto fewer cores).
    """
    wanted = claimed.resources.gpus
    if wanted > len(gpu_ids):
        raise PlatformFault(f"run {claimed.run_id} needs {wanted} GPU(s), this worker slot owns "
                            f"{list(gpu_ids)}; route the phase to a GPU queue.")
    if cpuset is not None and claimed.resources.cpus > len(cpuset.split(",")):
        raise PlatformFault(f"run {claimed.run_id} needs {claimed.resources.cpus:g} CPUs, this "
                            f"worker slot owns cores {cpuset}; raise ARENA_WORKER_CPUS_PER_SLOT "
                            "or route the phase to a worker with more cores per slot.")
    return ExecutionRequest(
        run_id=claimed.run_id, image=claimed.image or default_image, submission_dir=submission_dir,
        bundle_dir=bundle_dir, output_dir=output_dir, time_limit_s=claimed.time_limit_s,
        cpus=claimed.resources.cpus, memory_mb=claimed.resources.memory_mb,
        gpu_ids=tuple(gpu_ids[:wanted]), log_cap_bytes=log_cap_bytes,
        # A random suffix: a container left by a killed attempt must not block the name.
        deployment=deployment, answers_dir=answers_dir, resources=claimed.resources,
        live_tail=live_tail, cpuset=cpuset, wall_backstop_factor=wall_backstop_factor,
        name=f"{container_prefix(deployment, claimed.run_id)}{claimed.fencing_token}-"
             f"{uuid.uuid4().hex[:8]}")


class Heartbeat:
    """Background lease renewal; `lost` (and `cancel`) are set when the server says 409.

    Network errors are logged and retried on the next beat: the lease outlives several beats,
    and if it expires anyway the server fences our final write.
    """

    def __init__(self, beat: Callable[[str], bool], interval_s: float, stage: str) -> None:
        self.stage = stage
        self.lost, self.cancel = threading.Event(), threading.Event()
        self._beat, self._interval_s = beat, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="arena-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # Bounded: a beat stuck in HTTP retries must not hold the run's result back; a late
        # answer after this point changes nothing (the verdict is already decided).
        self._thread.join(timeout=max(5.0, self._interval_s))

    def beat_now(self) -> bool:
        """One heartbeat; returns False (and cancels) when the lease was lost."""
        try:
            if self._beat(self.stage):
                return True
        except Exception as exc:  # noqa: BLE001 - a missed beat is retried, never fatal
            log.warning("run.heartbeat.failed", extra={"error": repr(exc)})
            return True
        log.warning("run.heartbeat.lost", extra={"stage": self.stage})
        self.lost.set()
        self.cancel.set()
        return False

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            if not self.beat_now():
                return


def merge_stages(train: ExecutionResult, test: ExecutionResult) -> ExecutionResult:
    """One record for both stages: limits hit in either, meta-test's exit, both logs."""
    return ExecutionResult(
        exit_code=test.exit_code, oom_killed=train.oom_killed or test.oom_killed,
        timed_out=test.timed_out, wall_time_s=train.wall_time_s + test.wall_time_s,
        host_starved=test.host_starved, limit_hit=test.limit_hit,
        stall_s=None if train.stall_s is None or test.stall_s is None
        else train.stall_s + test.stall_s,
        stdout=train.stdout + test.stdout, stderr=train.stderr + test.stderr,
        stdout_truncated=train.stdout_truncated or test.stdout_truncated,
        stderr_truncated=train.stderr_truncated or test.stderr_truncated,
        output_exceeded=train.output_exceeded or test.output_exceeded,
        cancelled=train.cancelled or test.cancelled,
        meta_train_chars=(len(train.stdout), len(train.stderr)),
        output_detail=train.output_detail or test.output_detail,
        cpu_s=None if train.cpu_s is None or test.cpu_s is None else train.cpu_s + test.cpu_s,
        peak_memory_mb=max((p for p in (train.peak_memory_mb, test.peak_memory_mb)
                            if p is not None), default=None),
        started_at=train.started_at, stages=train.stages + test.stages,
        marks=train.marks + test.marks, task_times=test.task_times)


def with_stage(result: ExecutionResult, stage: str, began: float,
               extra: tuple[StageMark, ...] = ()) -> ExecutionResult:
    """`result` with its stage's usage and marks (container start, `extra`, end) recorded
    (issue 38.6); `began` is the Unix time before the stage was launched."""
    key = stage.replace("-", "_")
    stall = None if result.stall_s is None else round(result.stall_s, 3)
    usage = StageUsage(stage, round(result.wall_time_s, 3), result.cpu_s,  # type: ignore[arg-type]
                       result.peak_memory_mb, stall)
    start = StageMark(f"{key}_container_start", result.started_at or began)  # type: ignore[arg-type]
    end = StageMark(f"{key}_end", max(time.time(), start.at))  # type: ignore[arg-type]
    return replace(result, stages=(usage,), marks=(start, *extra, end))


StageRunner = Callable[[str, tuple[str, ...], StageBudget, Path | None,
                        tuple[tuple[Path, str], ...], Path], ExecutionResult]
"""`(stage, command, time bounds, bundle_dir, read-only mounts, output_dir) -> result`."""


def run_two_stages(request: ExecutionRequest, cancel: threading.Event,
                   run_stage: StageRunner, paths: dict[str, str]) -> ExecutionResult:
    """Meta-train, then meta-test with the task server, through `run_stage`.

    `paths` names the folders as the participant side sees them: `submission`, `bundle`,
    `output`, `learner`, `channel` (a folder), `scratch` (colon-separated) and `python`.
    """
    if request.answers_dir is None:
        raise PlatformFault("the execution request names no answers folder; build it with "
                            "build_request(..., answers_dir=...)")
    train_command = tuple(meta_train_command(paths["python"], paths["submission"],
                                             paths["bundle"], paths["output"]))
    _mark(request, "meta-train")
    began = time.time()
    train = with_stage(run_stage("meta-train", train_command, request.budget,
                                 request.bundle_dir, (), request.output_dir), "meta-train", began)
    # Ended in meta-train: all of the log is meta-train's, and the finish body says so
    # (`meta_train_log`), so the owner of a secret phase still reads their own traceback.
    train = replace(train, meta_train_chars=(len(train.stdout), len(train.stderr)))
    if not train.ok or cancel.is_set():
        return train
    remaining = request.budget.after(train)
    if (spent := remaining.spent) is not None:  # the backstop alone: starved, never charged
        starved = spent is LimitHit.BACKSTOP
        return replace(train, timed_out=not starved, host_starved=starved, limit_hit=str(spent))
    make_readable(request.learner_dir)
    scratch_out = request.meta_test_output_dir
    scratch_out.mkdir(exist_ok=True)
    mounts = ((request.learner_dir, paths["learner"]), (request.channel_dir, paths["channel"]))

    def launch(control: Path) -> ExecutionResult:
        _mark(request, "meta-test")
        command = tuple(meta_test_command(paths["python"], f"{paths['channel']}/{control.name}",
                                          paths["submission"],
                                          paths["learner"], paths["scratch"].split(":"),
                                          request.task_seed, request.threads,
                                          sandboxed=paths.get("sandboxed") == "1",
                                          private_copy=paths.get("private_copy")))
        return run_stage("meta-test", command, remaining, None, mounts, scratch_out)

    began = time.time()
    test, report = run_meta_test(request.answers_dir, request.channel_dir, remaining.server_s,
                                 launch,
                                 progress_path=request.output_dir.parent / PROGRESS_FILE)
    # The task server's clock started just before the launch; the supervisor's hello ends
    # its start-up.
    supervisor = ((StageMark("supervisor_start", began + report.startup_s),)
                  if report.startup_s > 0 else ())
    times = measure_task_times(request.answers_dir / PREDICTIONS, began + report.startup_s)
    return replace(merge_stages(train, with_stage(test, "meta-test", began, supervisor)),
                   task_times=times)


def _mark(request: ExecutionRequest, stage: str) -> None:
    if request.live_tail is not None:
        request.live_tail.mark(stage)


def make_docker_executor(docker_client: Any, code_dir: Path | None = None,
                         task_namespaces: bool = True, prefault: bool = True,
                         reset_dentries: bool = False, shared_task_root: bool = True
                         ) -> Executor:
    """An executor that runs both stages in Docker sandboxes (`worker.sandbox.run_sandbox`);
    `code_dir` is the host folder of `submission_api` to mount (default: the worker's own).
    `task_namespaces=False`: the meta-test container keeps Docker's default seccomp profile,
    and its tasks share namespaces (the fallback of a host that refuses them; tests).
    `prefault`: every page of the image and of the run's data is read before the run
    (`worker/prefault.py`), so that no run can leave bits in which of them are resident.
    `reset_dentries`: the host's unused dentries and inodes are dropped first (before the
    pre-fault, which then finds what the drop evicted), so no run reads names an earlier one
    looked up (`worker/dentry_reset.py`); the run's isolation line says whether it was done.
    `shared_task_root`: the meta-test container gets the worker's read-only copy of the image's
    folders for the per-task root (`worker/task_root_cache.py`) instead of copying them."""
    from submission_api.runner.heap import with_huge_pages
    from worker import task_root_cache
    from worker.sandbox import SandboxPlatformError, run_sandbox
    from worker.sandbox_config import PRIVATE_COPY_TARGET, SandboxSpec, build_limits

    def execute(request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        threads = str(request.threads)

        def run_stage(stage: str, command: tuple[str, ...], budget: StageBudget,
                      bundle_dir: Path | None, mounts: tuple[tuple[Path, str], ...],
                      output_dir: Path) -> ExecutionResult:
            spec = SandboxSpec(
                image=request.image, command=command, submission_dir=request.submission_dir,
                bundle_dir=bundle_dir, output_dir=output_dir, name=f"{request.name}-{stage}",
                code_dir=code_dir, read_only_mounts=mounts + (
                    task_root_cache.mount_for(shared) if stage == "meta-test" else ()),
                output_read_only=stage == "meta-test",
                private_copy=stage == "meta-test",
                task_namespaces=task_namespaces and stage == "meta-test",
                env=with_huge_pages({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}))
            limits = build_limits(request.run_resources, wall_time_s=budget.wall_s,
                                  cpu_time_s=budget.cpu_s, backstop_s=budget.backstop_s,
                                  cpuset_cpus=request.cpuset,
                                  gpus=request.gpu_ids, log_cap_bytes=request.log_cap_bytes)
            try:
                return run_sandbox(docker_client, spec, limits, cancel=cancel,
                                   live_tail=request.live_tail)
            except SandboxPlatformError as exc:
                raise PlatformFault(f"sandbox platform error: {exc}") from exc

        reap_stale_containers(docker_client, container_prefix(request.deployment, request.run_id))
        shared = task_root_cache.for_image(
            docker_client, request.image, (*META_TEST_SCRATCH, "/submission", LEARNER_TARGET),
            code_dir) if shared_task_root and task_namespaces and not request.gpu_ids else None
        from worker.dentry_reset import reset_before_run

        reset_before_run(reset_dentries, request.answers_dir)
        if prefault:
            from worker.prefault import prefault_run

            try:
                prefault_run(docker_client, request.image, request.bundle_dir, code_dir)
            except Exception as exc:  # noqa: BLE001 - the engine's or the host's, never theirs
                raise PlatformFault(f"sandbox platform error: could not pre-fault the image "
                                    f"and data: {type(exc).__name__}: {exc}") from exc
        paths = {"python": "python3", "submission": "/submission", "bundle": "/bundle",
                 "output": "/output", "learner": LEARNER_TARGET, "channel": CHANNEL_TARGET,
                 "scratch": ":".join(META_TEST_SCRATCH), "sandboxed": "1",
                 "private_copy": PRIVATE_COPY_TARGET}
        return run_two_stages(request, cancel, run_stage, paths)

    return execute


def reap_stale_containers(docker_client: Any, prefix: str) -> int:
    """Kill and remove containers a killed earlier attempt of this run left behind.

    A worker that dies mid-run leaves its container running under the daemon, with nobody to
    enforce the wall clock; the next attempt of the same run owns its lease, so it reaps them —
    only its own deployment's (`prefix` from `container_prefix`), never another's.
    """
    reaped = 0
    for container in docker_client.containers.list(all=True, filters={"name": prefix}):
        if container.name.startswith(prefix):
            try:
                container.remove(force=True)
                reaped += 1
                log.warning("run.sandbox.reaped", extra={"container": container.name})
            except Exception as exc:  # noqa: BLE001 - it may be gone already
                log.warning("run.sandbox.reap_failed",
                            extra={"container": container.name, "error": repr(exc)})
    return reaped
