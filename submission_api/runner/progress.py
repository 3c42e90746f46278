"""Progress bars for `arena run`: the participant side writes `progress.json` (stage, items done,
total, elapsed); this view polls it and draws meta-training and test-task bars with an ETA and
the time left before the limit. When stdout is not a terminal (a log file, CI, `| tee`), a bar
would be one frozen line: plain lines are printed instead, at each stage's start and end and
every `PLAIN_EVERY_S` between."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TextIO

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

LABELS = {"meta_fit": "meta-training (tasks/batches drawn)", "meta_test": "test tasks"}
PLAIN_EVERY_S = 30.0


class ProgressView:
    """A context manager that mirrors the participant side's progress.json."""

    def __init__(self, run_dir: Path, time_limit_s: float | None, enabled: bool = True,
                 stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = run_dir / "progress.json"
        self.time_limit_s = time_limit_s
        self.stream = stream or sys.stdout
        self.plain = enabled and not self.stream.isatty()
        self.enabled = enabled
        self.clock, self.started = clock, clock()
        self.said: dict[str, tuple[float, object]] = {}  # stage -> (when, done) last printed
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            disable=not enabled or self.plain,
        )
        self.bars: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressView:
        self.progress.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.progress.__exit__(kind, error, trace)

    def refresh(self) -> None:
        """Read progress.json (if any) and move the bar of its stage (or print a line)."""
        if not self.enabled:
            return
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        stage = state.get("stage", "")
        label = LABELS.get(stage)
        if label is None:
            return
        if self.plain:
            self._say(stage, label, state)
            return
        if stage not in self.bars:
            self.bars[stage] = self.progress.add_task(label, total=state.get("total"))
        self.progress.update(
            self.bars[stage], completed=state.get("done", 0), total=state.get("total")
        )

    def _say(self, stage: str, label: str, state: dict) -> None:
        """One plain line when the stage starts, ends, or `PLAIN_EVERY_S` after the last."""
        now, done, total = self.clock(), state.get("done", 0), state.get("total")
        last = self.said.get(stage)
        finished = total is not None and done == total
        due = last is None or (now - last[0] >= PLAIN_EVERY_S and done != last[1]) or (
            finished and last[1] != done)
        if not due:
            return
        self.said[stage] = (now, done)
        count = f"{done} of {total}" if total is not None else f"{done}"
        limit = (f", {max(0.0, self.time_limit_s - (now - self.started)):.0f} s left of the "
                 "limit") if self.time_limit_s is not None else ""
        print(f"progress: {label}: {count} ({now - self.started:.0f} s elapsed{limit})",
              file=self.stream, flush=True)
