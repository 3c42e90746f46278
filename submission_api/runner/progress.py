"""Progress bars for `arena run`: the participant side writes `progress.json` (stage, items done,
total, elapsed); this view polls it and draws meta-training and test-task bars with an ETA and
the time left before the limit."""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType

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


class ProgressView:
    """A context manager that mirrors the participant side's progress.json."""

    def __init__(self, run_dir: Path, time_limit_s: float | None, enabled: bool = True) -> None:
        self.path = run_dir / "progress.json"
        self.time_limit_s = time_limit_s
        self.enabled = enabled
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            disable=not enabled,
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
        """Read progress.json (if any) and move the bar of its stage."""
        if not self.enabled:
            return
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        stage = state.get("stage", "")
        label = {"meta_fit": "meta-training (tasks/batches drawn)", "meta_test": "test tasks"}.get(
            stage
        )
        if label is None:
            return
        if stage not in self.bars:
            self.bars[stage] = self.progress.add_task(label, total=state.get("total"))
        self.progress.update(
            self.bars[stage], completed=state.get("done", 0), total=state.get("total")
        )
