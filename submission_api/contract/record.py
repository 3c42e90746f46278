"""The fixed result record of one participant side, in the manner of DOMjudge's runguard: the
executors (the Docker sandbox, the worker's local mode, `arena run`) report facts only — how the
process ended, which limit was hit and what says so, how far the participant side got — and
`submission_api.contract.verdict.decide_verdict` alone turns them into a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SIGKILL = 9


def signal_of(exit_code: int | None, *, container: bool) -> int | None:
    """The signal that ended a process, from its exit status: a negative return code from
    `subprocess` (the signal's number), or 128 + the number from a container's init."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    if container and 128 < exit_code < 160:
        return exit_code - 128
    return None


def exit_status(exit_code: int | None, *, container: bool) -> tuple[int | None, int | None]:
    """`(exit code, signal)` as the record holds them: a death by signal reads 128 + its number
    whichever executor saw it (a container's init reports it so, `subprocess` as -number), so
    that the worker and `arena run` describe the same end in the same words."""
    signal = signal_of(exit_code, container=container)
    return (128 + signal if signal is not None else exit_code), signal


@dataclass(frozen=True)
class ReportedStatus:
    """What the meta-train side last wrote to status.json (untrusted, shape-checked)."""

    stage: str | None = None
    error: str | None = None
    traceback: str | None = None
    task: int | None = None
    problem: str | None = None
    """Why the file could not be read as a status (a participant writing it themselves)."""

    @classmethod
    def from_mapping(cls, status: Mapping[str, Any]) -> ReportedStatus:
        """From `submission_api.runner.scorer.read_status`'s checked fields."""
        return cls(stage=status.get("stage"), error=status.get("error"),
                   traceback=status.get("traceback"), task=status.get("task"))


@dataclass(frozen=True)
class MetaTestEnd:
    """How meta-test ended, as the trusted task server saw it (`answers/meta_test.json`)."""

    tasks_done: int = 0
    n_tasks: int = 0
    reason: str | None = None
    message: str | None = None
    traceback: str | None = None
    failed_task: int | None = None
    stage: str | None = None


@dataclass(frozen=True)
class ResultRecord:
    """Every fact the verdict is decided on.

    `exit_code`/`signal` are those of the stage that ended the participant side (meta-train if
    it failed, else meta-test's supervisor), as `exit_status` makes them. `oom_killed` is
    evidence, never a guess from the signal: the engine's OOMKilled flag or `oom` event, or a
    rise of the cgroup's `memory.events` oom_kill count. `status` is the meta-train side's last
    report; `meta_test` the trusted side's, None when meta-test never started.
    """

    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    output_exceeded: bool = False
    output_detail: str | None = None
    """Which shape bound of the output folder was passed (its depth, its entries), in words;
    None: its size, or none."""
    wall_time_s: float = 0.0
    time_limit_s: float | None = None
    memory_limit_mb: int | None = None
    peak_memory_mb: float | None = None
    """The participant side's peak memory, whole process tree (the largest of its stages';
    None where the executor cannot read it)."""
    cpu_time_s: float | None = None
    """Its CPU time, user and system, every process of every stage (None: not readable)."""
    limit_hit: str | None = None
    """Which time bound ended it: "cpu" (its CPU time), "wall" (its wall clock less the time
    the host kept it waiting for a core), "backstop" (the plain wall clock, reached only while
    the host starved it); None: none, or an executor that does not say (issue 38.3)."""
    stall_s: float | None = None
    """Seconds it had work but no core (None: not readable)."""
    status: ReportedStatus = ReportedStatus()
    meta_test: MetaTestEnd | None = None
    stderr_empty: bool = False
    logs_truncated: bool = False
