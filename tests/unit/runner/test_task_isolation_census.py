"""The channel census under `arena run` (issue 19): a probe writes a nonce into every channel it
can reach in each test task and looks for it in the next; no nonce may cross, every task must
start with the same attributes, and the probe must have written (and read back) the channels
this machine offers, so that the census cannot pass by writing nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from submission_api.protocols import ProtocolParams
from submission_api.runner.local import run_local

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from isolation_census import (  # noqa: E402 - path above
    crossings,
    moved_machine_counters,
    parse_census,
    residency_crossings,
    write_census,
)

FOUR_TASKS = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 2})
ALWAYS_WRITTEN = ("frames", "heap", "System V segment", "abstract socket")
"""Channels every Linux machine gives a task (files and xattrs depend on the folders)."""


def test_no_nonce_crosses_a_task_boundary_under_arena_run(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    result = run_local(write_census(tmp_path / "census"), tiny_collection, tmp_path / "out",
                       protocol=FOUR_TASKS, cache_dir=arena_cache, time_limit_s=600)

    assert result.state == "finished", result.message
    reports = parse_census((tmp_path / "out" / "stderr.txt").read_text())
    assert len(reports) == 4
    wrote = set(reports[0]["wrote"])
    assert {c for c in wrote if not c.startswith(("file", "locked", "xattr", "process"))} >= \
        set(ALWAYS_WRITTEN), wrote
    assert any(c.startswith("locked folder") for c in wrote), wrote
    assert any(c.startswith("process") for c in wrote), wrote
    assert crossings(reports) == []
    if all(r["world"]["pid"] == 1 for r in reports):  # own namespaces: this kernel allows them
        assert moved_machine_counters(reports) == []
    # Issue 34: the shipped file (4 MiB: read in place before) and the learner's are read from
    # the run's private tmpfs copy (/dev/shm here): every page resident in every task. (The
    # image's files are pre-faulted by the platform's worker only: the sandbox census.)
    assert residency_crossings(reports, ("shipped", "learner")) == []
