"""The fixed record a sandboxed run ends with, and the one error that means "not the participant".

Like DOMjudge's runguard, the sandbox only reports facts (exit code, which limit was hit, capped
logs); the caller decides the verdict. Anything the Docker engine or the host gets wrong raises
`SandboxPlatformError` instead: the worker retries it and never charges it to the participant.
"""

from __future__ import annotations

from dataclasses import dataclass

from submission_api.contract.usage import StageMark, StageUsage, TaskTimes


class SandboxPlatformError(RuntimeError):
    """The platform (Docker engine, host mounts) failed; retry the run, do not blame the code.

    The message holds the details for operators (engine URLs, host paths, scripts to run);
    `short_cause` is the one line a participant may read on their run.
    """

    def __init__(self, message: str,
                 short_cause: str = "the sandbox failed on this worker") -> None:
        super().__init__(message)
        self.short_cause = short_cause


@dataclass(frozen=True)
class SandboxResult:
    """What happened in one sandboxed run.

    `exit_code` is None only if the engine never reported one. `oom_killed`, `timed_out` and
    `output_exceeded` say which bound ended or spoiled the run; `cancelled` that the caller asked
    for the kill; `stdout`/`stderr` are decoded
    (invalid UTF-8 replaced) and hold at most the log cap in bytes each.
    """

    exit_code: int | None
    oom_killed: bool
    timed_out: bool
    wall_time_s: float
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    output_exceeded: bool = False
    cancelled: bool = False
    output_detail: str | None = None
    """Which bound of /output the run passed, when a shape bound (depth, entries) rather than
    the size (`output_walk.shape_bound`)."""
    # Two stages merged (pipeline/execute.py): how many leading characters of stdout and stderr
    # meta-train wrote, so the server can tell them from what meta-test wrote (issue 20).
    meta_train_chars: tuple[int, int] | None = None
    cpu_s: float | None = None
    """CPU time of every process of the container, from its cgroup (None: not readable)."""
    peak_memory_mb: float | None = None
    started_at: float | None = None
    """Unix time the container was started."""
    host_starved: bool = False
    """Killed at the plain wall clock's backstop while under its CPU time and its charged wall
    clock: the host starved it (issue 38.3), not the participant's doing."""
    limit_hit: str | None = None
    """Which time bound ended it (`sandbox_clock.LimitHit`: cpu, wall, backstop), or None."""
    stall_s: float | None = None
    """Seconds it had work but no core (the cgroup's PSI; None: unreadable)."""
    task_times: TaskTimes | None = None
    """The test tasks' durations (`worker.pipeline.execute.measure_task_times`)."""
    stages: tuple[StageUsage, ...] = ()
    """Per stage (the two-stage executors fill it): CPU time, peak memory, wall time."""
    marks: tuple[StageMark, ...] = ()
    """When each stage began and ended (`submission_api.contract.usage.MARK_ORDER`)."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within every bound."""
        return (self.exit_code == 0 and not self.oom_killed and not self.timed_out
                and not self.output_exceeded and not self.cancelled and not self.host_starved)
