"""The internal API's request bodies (docs/internals.md, "Platform: server <-> worker"), once:
the worker builds them (`worker.client`), the server's routes take them as they are
(`server/api/internal.py`; FastAPI validates a dataclass body by its annotations, then
`__post_init__` checks the bounds, so an overlong field is a 422, never a 500).

Standard library only: the contract package runs where FastAPI and pydantic do not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from submission_api.contract.caps import LOG_TAIL_CAP, MESSAGE_CAP, REASON_CAP
from submission_api.contract.usage import RunUsage

WORKER_NAME_CAP = 200
GPUS_CAP = 64
"""GPUs a worker may report holding."""
IMAGES_CAP, IMAGE_NAME_CAP = 1000, 255
"""Sandbox images a claim may list, and the length of one name."""
UNHEALTHY_CAP = 2000
"""Length of the reason an unhealthy worker reports."""
TASKS_CAP = 100_000
"""Per-task results one finish may carry."""

HeartbeatStage = Literal["preparing", "running", "scoring"]
FinishState = Literal["finished", "failed", "timed_out"]
ProgressStep = Literal["meta_fit", "meta_test"]
TaskIsolation = Literal["own", "shared"]
"""A worker host's test tasks: their own namespaces, or the shared fallback (issue 34)."""
FailureStage = Literal["config", "import", "meta_fit", "save", "load", "fit", "predict",
                       "receive", "meta_test"]
"""Where a run failed: a participant stage (`contract.reasons.STAGE_REASONS`), or `meta_test`
for anything past meta-train that no meta-train stage explains."""


def _check_length(name: str, value: object, cap: int, least: int = 0) -> None:
    if value is not None and not least <= len(value) <= cap:  # type: ignore[arg-type]
        raise ValueError(f"{name} has length {len(value)}; expected {least} to {cap}")  # type: ignore[arg-type]


def _check_isolation(value: object) -> None:
    if value not in (None, "own", "shared"):
        raise ValueError(f"task_isolation is {value!r}; expected 'own' or 'shared'")


def _json(body: object) -> dict[str, Any]:
    """The body as the wire carries it: None fields left out where optional."""
    return {key: value for key, value in asdict(body).items()  # type: ignore[call-overload]
            if value is not None or key in ("reason", "message")}


@dataclass(frozen=True)
class ClaimBody:
    worker: str
    gpus: list[Any] | None = None
    """Optional: the GPUs this worker holds."""
    images: list[str] | None = None
    """Optional: the sandbox images this worker's engine holds (checked against a phase's image
    when the phase is created)."""
    unhealthy: str | None = None
    """Set by a worker whose own resources fail (disk, engine): the claim is withheld, the
    server only records the reason for the workers page (issue 21) and answers 409."""
    task_isolation: TaskIsolation | None = None
    """Optional: what the worker's start-up probe found (issue 34): `own` namespaces per test
    task on its host, or `shared` (the host refuses them; every run falls back)."""
    host_lock: bool = False
    """The worker runs a claim marked `exclusive_host` alone on its host (worker/host_lock.py).
    A worker that does not say so (one older than the host lock ignores `exclusive_host`) is
    never given a run of a phase with secret test data: that claim answers 409
    `worker.no_host_lock` and the run waits for a worker that says so."""

    def __post_init__(self) -> None:
        if not isinstance(self.host_lock, bool):
            raise ValueError(f"host_lock is {self.host_lock!r}; expected true or false")
        _check_isolation(self.task_isolation)
        _check_length("worker", self.worker, WORKER_NAME_CAP, least=1)
        _check_length("unhealthy", self.unhealthy, UNHEALTHY_CAP, least=1)
        _check_length("gpus", self.gpus, GPUS_CAP)
        _check_length("images", self.images, IMAGES_CAP)
        for image in self.images or ():
            _check_length("an image name", image, IMAGE_NAME_CAP)

    def to_json(self) -> dict[str, Any]:
        body = _json(self)
        if not self.host_lock:  # the default, as a worker older than the field sends it
            del body["host_lock"]
        return body


@dataclass(frozen=True)
class RunProgress:
    """What the run is doing now, for the participant watching it (all optional)."""

    step: ProgressStep | None = None
    tasks_done: int | None = None
    tasks_total: int | None = None
    log_tail: str | None = None
    """The last lines of stdout/stderr (`LOG_TAIL_CAP`)."""

    def __post_init__(self) -> None:
        for name in ("tasks_done", "tasks_total"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name}={value}; expected a count >= 0")
        _check_length("log_tail", self.log_tail, LOG_TAIL_CAP)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class HeartbeatBody:
    fencing_token: int
    stage: HeartbeatStage
    gpus: list[Any] | None = None
    progress: RunProgress | None = None
    task_isolation: TaskIsolation | None = None
    """As the claim's: the worker's start-up probe, known once it has ended (issue 34)."""

    def __post_init__(self) -> None:
        _check_length("gpus", self.gpus, GPUS_CAP)
        _check_isolation(self.task_isolation)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"fencing_token": self.fencing_token, "stage": self.stage}
        if self.gpus is not None:
            body["gpus"] = self.gpus
        if self.task_isolation is not None:
            body["task_isolation"] = self.task_isolation
        if self.progress is not None:
            body["progress"] = self.progress.to_json()
        return body


@dataclass(frozen=True)
class TaskResult:
    """One test task's score (`submission_api.scoring.TaskRecord.to_dict`, extra keys ignored)."""

    id: int
    dataset: str
    n_ways: int
    n_shots: int
    score: float
    group: str = "test"
    accuracy: float | None = None
    worst_class_accuracy: float | None = None
    """FewSTAB's per-task wAcc (the lowest per-class accuracy), which its board's statistics
    resample; None elsewhere."""


ISOLATION_CAP = 1000


@dataclass(frozen=True)
class FinishBody:
    fencing_token: int
    state: FinishState
    reason: str | None = None
    message: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    tasks: list[TaskResult] = field(default_factory=list)
    log: str = ""
    isolation: str | None = None
    """The run's isolation line (`MetaTestReport.isolation`): whether its test tasks had their
    own namespaces or fell back to shared ones; None when meta-test never started. Stored with
    the run and shown to organizers and operators (issue 34)."""
    usage: RunUsage | None = None
    """Per-stage CPU time and peak memory and the stage marks (issue 38.6); stored with the
    run, shown to the phase's organizers."""
    stage: FailureStage | None = None
    """Where a failed run failed, as the worker's verdict placed it (issue 35.3): the server's
    secrecy rule reads it instead of the message's words. None from an older worker (the
    server then redacts the message) and for a scored run."""
    meta_train_log: str | None = None
    """What meta-train wrote (its stdout and stderr, sectioned as `log` is), apart from `log`
    (both stages, the organizers' view): the part of the log the owner of a run in a phase with
    secret test data may read (issue 35.3), cut by the worker from its own record of where
    meta-test began, never from the log's text. None when the worker cannot tell the stages
    apart (an older worker, a run that failed before executing): the server then withholds the
    whole log from such an owner."""

    def __post_init__(self) -> None:
        _check_length("reason", self.reason, REASON_CAP)
        _check_length("message", self.message, MESSAGE_CAP)
        _check_length("tasks", self.tasks, TASKS_CAP)
        _check_length("isolation", self.isolation, ISOLATION_CAP)


@dataclass(frozen=True)
class ReleaseBody:
    fencing_token: int
    error: str
    """The short cause, shown on the run."""
    detail: str | None = None
    """Optional: the details for operators only (engine URLs, host paths), kept on the
    worker's row."""

    def __post_init__(self) -> None:
        _check_length("error", self.error, MESSAGE_CAP)
        _check_length("detail", self.detail, MESSAGE_CAP)

    def to_json(self) -> dict[str, Any]:
        return _json(self)
