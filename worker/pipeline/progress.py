"""What a run is doing, read from its work folder for the participant watching it, and the
one permission fix both stages' inputs need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROGRESS_FILE = "progress.json"


def read_progress(work: Path) -> dict[str, Any] | None:
    """What the run is doing, for the participant watching it: the task server's count of test
    tasks (written outside any sandbox) or, before that, meta-train's own progress.json (written
    by participant code: read as untrusted, bounded, only numbers kept)."""
    from submission_api.runner.scorer import _read_regular

    for path, step in ((work / PROGRESS_FILE, "meta_test"),
                       (work / "output" / PROGRESS_FILE, "meta_fit")):
        raw = _read_regular(path, 4096)
        if not raw:
            continue
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # participant-written: any nesting
            return None
        if not isinstance(data, dict):
            return None
        numbers = {key: data.get(key) for key in ("done", "total")}
        ok = {k: v for k, v in numbers.items()
              if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9}
        return {"step": step, "tasks_done": ok.get("done") if step == "meta_test" else None,
                "tasks_total": ok.get("total") if step == "meta_test" else None}
    return None


def make_readable(tree: Path) -> None:
    """Let the sandbox user read what this (root or worker) user wrote: the extracted submission
    whatever modes its zip carried, the learner copied out of meta-train."""
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
