"""An in-memory job queue for tests: records every job it is given (it stood in production
code, `server/services/queue.py`, until the run contract's clean-up moved it here)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RecordingJobQueue:
    """An in-memory queue for tests and dry runs: records every job it is given.

    With `inspectable`, it answers `pending_runs` like a broker: every job sent and not yet
    `take`n by a (pretend) worker or `lose_all`'d (a broker restart)."""

    jobs: list[tuple[int, str, str]] = field(default_factory=list)
    countdowns: list[float] = field(default_factory=list)
    """The `countdown_s` of each job in `jobs`."""
    fail: bool = False
    inspectable: bool = False
    held: list[tuple[int, str, str]] = field(default_factory=list)

    def enqueue(self, run_id: int, run_token: str, queue: str, countdown_s: float = 0.0) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable (RecordingJobQueue.fail is set)")
        self.jobs.append((run_id, run_token, queue))
        self.countdowns.append(countdown_s)
        self.held.append((run_id, run_token, queue))

    def pending_runs(self, queue: str) -> set[int] | None:
        if not self.inspectable:
            return None
        return {run_id for run_id, _token, name in self.held if name == queue}

    def take(self, run_id: int) -> None:
        self.held = [job for job in self.held if job[0] != run_id]

    def lose_all(self) -> None:
        self.held = []
