"""What a run cost and when each stage happened (issue 38.6), as the worker sends it with
`finish` and the server keeps it with the run for the phase's organizers.

Like DOMjudge's runguard, every run records the CPU time and the peak memory of each of its
containers (read from the container's cgroup, whole process tree included), and the moments
its stages began and ended, so that "where did the time go" has an answer for a slow run.

Standard library only: the contract package runs where FastAPI and pydantic do not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

StageName = Literal["meta-train", "meta-test"]
MarkName = Literal["meta_train_container_start", "meta_train_end",
                   "meta_test_container_start", "supervisor_start", "meta_test_end",
                   "scoring_start", "scoring_end", "publish"]
MARK_ORDER: tuple[str, ...] = ("meta_train_container_start", "meta_train_end",
                               "meta_test_container_start", "supervisor_start",
                               "meta_test_end", "scoring_start", "scoring_end", "publish")
"""The order the marks of a complete run are in (a failed run has a prefix of them)."""
MARKS_CAP, STAGES_CAP = 16, 4
MAX_SECONDS = 10.0 ** 7
"""Bound on any duration (about 115 days): a larger one is a clock or unit mistake."""


def _check_seconds(name: str, value: float | None) -> None:
    if value is not None and not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name}={value}; expected seconds from 0 to {MAX_SECONDS:.0f}")


@dataclass(frozen=True)
class StageUsage:
    """One container's cost: CPU time (user + system, every process in it) and peak memory,
    None where the host could not say (a cgroup layout the driver does not read)."""

    stage: StageName
    wall_s: float
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    stall_s: float | None = None
    """Of `wall_s`, how long its processes had work but no core (PSI; issue 38.3)."""

    def __post_init__(self) -> None:
        _check_seconds(f"{self.stage} wall_s", self.wall_s)
        _check_seconds(f"{self.stage} cpu_s", self.cpu_s)
        _check_seconds(f"{self.stage} stall_s", self.stall_s)
        if self.peak_memory_mb is not None and not 0 <= self.peak_memory_mb <= 10.0 ** 8:
            raise ValueError(f"{self.stage} peak_memory_mb={self.peak_memory_mb}; expected "
                             "megabytes from 0 to 1e8")


@dataclass(frozen=True)
class StageMark:
    """A moment of the run, in Unix seconds (the worker's clock)."""

    name: MarkName
    at: float

    def __post_init__(self) -> None:
        if not 0 < self.at < 10.0 ** 11:
            raise ValueError(f"mark {self.name} at={self.at}; expected Unix seconds")


@dataclass(frozen=True)
class TaskTimes:
    """How long the test tasks took, each from the previous one's answer (the first from the
    supervisor's start) to its own, as the trusted side stored them (issue 38.3): a summary,
    since a run may hold thousands of tasks."""

    count: int
    first_s: float
    median_s: float
    p90_s: float
    max_s: float
    slowest_task: int

    def __post_init__(self) -> None:
        if not 0 < self.count <= 10**6 or not 0 <= self.slowest_task <= 10**6:
            raise ValueError(f"task times of {self.count} tasks, slowest {self.slowest_task}; "
                             "expected 1 to 1e6 tasks")
        for name in ("first_s", "median_s", "p90_s", "max_s"):
            _check_seconds(f"tasks {name}", getattr(self, name))


@dataclass(frozen=True)
class RunUsage:
    """Per-stage cost and the run's stage marks, in the order they happened."""

    stages: list[StageUsage] = field(default_factory=list)
    marks: list[StageMark] = field(default_factory=list)
    tasks: TaskTimes | None = None
    """The test tasks' durations (None: meta-test ran no task, or an older worker)."""

    def __post_init__(self) -> None:
        if len(self.stages) > STAGES_CAP or len(self.marks) > MARKS_CAP:
            raise ValueError(f"usage has {len(self.stages)} stages and {len(self.marks)} "
                             f"marks; expected at most {STAGES_CAP} and {MARKS_CAP}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def cpu_s(self) -> float | None:
        """The whole participant side's CPU time (None when no stage could say)."""
        known = [s.cpu_s for s in self.stages if s.cpu_s is not None]
        return sum(known) if known else None

    @property
    def peak_memory_mb(self) -> float | None:
        """The largest peak of any stage (the stages run one after the other)."""
        known = [s.peak_memory_mb for s in self.stages if s.peak_memory_mb is not None]
        return max(known) if known else None


def usage_from_json(data: Any) -> RunUsage | None:
    """A stored usage back as a `RunUsage` (None when absent or of an older shape)."""
    if not isinstance(data, dict):
        return None
    try:
        tasks = data.get("tasks")
        return RunUsage(stages=[StageUsage(**s) for s in data.get("stages", [])],
                        marks=[StageMark(**m) for m in data.get("marks", [])],
                        tasks=TaskTimes(**tasks) if isinstance(tasks, dict) else None)
    except (TypeError, ValueError):
        return None
