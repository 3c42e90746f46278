"""Each test task's duration, kept with every run (issue 38.3: "nobody could say where the time
went"), read from what the trusted side wrote as each task ended; no participant code is asked."""

from __future__ import annotations

import os
from pathlib import Path

from submission_api.contract.usage import TaskTimes


def measure_task_times(predictions: Path, start: float) -> TaskTimes | None:
    """Each test task's duration, from the moments the task server stored the answers
    (`task_NNNNN.npy`, written on the trusted side as each task ends; the file system's clock,
    a few ms coarse): the first task from `start` (the supervisor's start), each next one from
    the previous answer. None when no task answered."""
    try:
        ended = sorted((entry.stat().st_mtime_ns / 1e9, int(entry.name[5:-4]))
                       for entry in os.scandir(predictions)
                       if entry.name.startswith("task_") and entry.name.endswith(".npy")
                       and entry.name[5:-4].isdigit())
    except OSError:
        return None
    if not ended:
        return None
    durations = [(max(0.0, at - before), task) for (at, task), before
                 in zip(ended, [start, *(at for at, _ in ended[:-1])], strict=True)]
    ordered = sorted(d for d, _ in durations)
    slowest, task = max(durations)
    return TaskTimes(count=len(ordered), first_s=round(durations[0][0], 4),
                     median_s=round(ordered[len(ordered) // 2], 4),
                     p90_s=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))], 4),
                     max_s=round(slowest, 4), slowest_task=task)
