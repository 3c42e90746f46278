"""The run's usage as the submission page shows it to the phase's organizers (issue 38.6):
per stage its CPU time, peak memory, wall time and the part of it spent waiting for a core, when
each stage began, as seconds after the first container started, and the test tasks' durations
(issue 38.3), so a slow run says where its time went."""

from __future__ import annotations

from typing import Any

from submission_api.contract.usage import usage_from_json

MARK_LABELS = {
    "meta_train_container_start": "meta-train container started",
    "meta_train_end": "meta-train ended",
    "meta_test_container_start": "meta-test container started",
    "supervisor_start": "supervisor started (its fork server preloaded)",
    "meta_test_end": "meta-test ended",
    "scoring_start": "scoring started",
    "scoring_end": "scoring ended",
    "publish": "result sent to the server",
}


def usage_rows(runs: list[Any]) -> list[dict[str, Any]]:
    """One entry per run that reported its usage: `index`, `stages`, `marks` (label, offset)."""
    shown = []
    for run in runs:
        usage = usage_from_json(getattr(run, "usage", None))
        if usage is None or not (usage.stages or usage.marks):
            continue
        first = usage.marks[0].at if usage.marks else 0.0
        shown.append({
            "index": run.index, "cpu_s": usage.cpu_s, "peak_memory_mb": usage.peak_memory_mb,
            "stages": usage.stages, "tasks": usage.tasks,
            "marks": [(MARK_LABELS.get(m.name, m.name), m.at - first) for m in usage.marks]})
    return shown
