"""The clocks a sandboxed run is charged by: its own CPU time, and a wall clock that stops while
the host starves it; the plain wall clock is only a backstop (issue 38.3).

A CPU quota on a loaded host leaves the container waiting for a core: at load 27-30 on 2 cores
a trivial meta-test took 46-99 s against 6-7 s alone, and honest runs were charged `timed_out`
on a wall-clock limit. As DOMjudge's runguard does, the driver bounds what the run itself used:
- CPU time (every process, read live from the run's parent cgroup, `sandbox_usage`), bounded by
  the phase's limit times its CPUs: the work it could have done with its cores to itself;
- a wall clock less the time the run had work ready but no core (the cgroup's pressure stall,
  PSI `cpu.pressure` "some": its waits for a core, the host's load or its own quota), so that a
  hang or a sleep is still charged at the phase's limit;
- the plain wall clock, cut at a multiple of the limit: reached only when the host starved the
  run (the other two had not), so that end is the platform's fault, retried and never charged.
Without a readable cgroup the run is charged by the plain wall clock, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from worker.sandbox_result import SandboxResult
from worker.sandbox_usage import CGROUP_ROOT, groups, read_usage


class LimitHit(StrEnum):
    CPU = "cpu"
    """Over its CPU time: the participant's (`timed_out`)."""
    WALL = "wall"
    """Over its wall clock less the host's starvation: the participant's (`timed_out`)."""
    BACKSTOP = "backstop"
    """Over the plain wall clock's backstop while under both: the host starved it."""


def read_stall_s(parent: str | None, root: Path = CGROUP_ROOT) -> float | None:
    """Seconds the parent cgroup's processes had work but no core (PSI "some" total), or None
    where no hierarchy holding the parent gives pressure (cgroup v1 without the unified tree,
    or a kernel without PSI)."""
    if parent is None:
        return None
    for group in groups(parent, root):
        try:
            text = (group / "cpu.pressure").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("some "):
                for part in line.split()[1:]:
                    key, _, value = part.partition("=")
                    if key == "total":
                        try:
                            return int(value) / 1e6
                        except ValueError:
                            return None
    return None


@dataclass
class RunClock:
    """The running container's CPU time and stall, read from its parent cgroup on demand."""

    parent: str | None
    root: Path = CGROUP_ROOT

    def cpu_s(self) -> float | None:
        return read_usage(self.parent, self.root).cpu_s

    def stall_s(self) -> float | None:
        return read_stall_s(self.parent, self.root)


def charged_wall_s(wall_s: float, stall_s: float | None) -> float:
    """The wall clock the run is charged: less the time it waited for a core (never < 0)."""
    return max(0.0, wall_s - (stall_s or 0.0))


def limit_hit(wall_time_s: float, cpu_time_s: float | None, backstop_s: float | None,
              wall_s: float, cpu_s: float | None, stall_s: float | None) -> LimitHit | None:
    """Which bound the run has passed, CPU time first (the participant's when both), or None.

    `wall_time_s`, `cpu_time_s` and `backstop_s` are the limits (SandboxLimits's); `wall_s`,
    `cpu_s` and `stall_s` what the run has used so far (None: unreadable).
    """
    if backstop_s is None:  # no backstop: the plain wall clock is the charged one
        stall_s = None
    if cpu_time_s is not None and cpu_s is not None and cpu_s > cpu_time_s:
        return LimitHit.CPU
    if charged_wall_s(wall_s, stall_s) > wall_time_s:
        return LimitHit.WALL
    if backstop_s is not None and wall_s > backstop_s:
        return LimitHit.BACKSTOP
    return None


@dataclass(frozen=True)
class StageBudget:
    """Time bounds of one stage (`worker.sandbox_clock`): the charged wall clock, CPU time
    (None: unbounded) and the plain wall clock's backstop (None: the charged wall clock is the
    plain one)."""

    wall_s: float
    cpu_s: float | None = None
    backstop_s: float | None = None

    def after(self, spent: SandboxResult) -> StageBudget:
        """What is left once a stage used `spent`."""
        stall = spent.stall_s if self.backstop_s is not None else None
        return StageBudget(
            self.wall_s - charged_wall_s(spent.wall_time_s, stall),
            None if self.cpu_s is None else self.cpu_s - (spent.cpu_s or 0.0),
            None if self.backstop_s is None else self.backstop_s - spent.wall_time_s)

    @property
    def exhausted(self) -> bool:
        return self.spent is not None

    @property
    def spent(self) -> LimitHit | None:
        """Which bound is used up, the participant's first (as `limit_hit` orders them): only
        the backstop spent means the host's starvation ate the plain clock, not the run."""
        if self.cpu_s is not None and self.cpu_s <= 0:
            return LimitHit.CPU
        if self.wall_s <= 0:
            return LimitHit.WALL
        if self.backstop_s is not None and self.backstop_s <= 0:
            return LimitHit.BACKSTOP
        return None

    @property
    def server_s(self) -> float:
        """How long the task server may wait for the stage: its plain wall clock's bound."""
        return self.backstop_s if self.backstop_s is not None else self.wall_s
