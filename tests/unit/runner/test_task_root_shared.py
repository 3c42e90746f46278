"""`runner/task_root_shared.load`: the worker's shared copy is used only where it matches the run
and cannot be written (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

from submission_api.runner import task_root
from submission_api.runner.task_root_shared import MARKER, VERSION, load, wanted_points

PLACES = [Path("/tmp"), Path("/dev/shm")]


def copy_for(target: Path, **change: object) -> None:
    """A copy's marker and mount points made for this process's folders (`change`d)."""
    folder = target / "arena-root-x"
    for point in wanted_points(PLACES):
        (folder / point.relative_to("/")).mkdir(parents=True, exist_ok=True)
    marker = {"version": VERSION, "folder": folder.name,
              "trees": [str(p) for p in task_root.trees(PLACES)],
              "points": [str(p) for p in wanted_points(PLACES)], "big": [], **change}
    (target / MARKER).write_text(json.dumps(marker))


def test_no_copy_is_no_reason_and_a_mismatched_one_says_why(tmp_path: Path) -> None:
    assert load(PLACES, tmp_path) == (None, "")
    copy_for(tmp_path, version=VERSION + 1)
    assert load(PLACES, tmp_path) == (None, "made by another version")
    copy_for(tmp_path, trees=["/usr/lib/python3.11"])
    assert load(PLACES, tmp_path) == (None, "made for other folders than this run's")
    copy_for(tmp_path, points=["/tmp"])
    assert load(PLACES, tmp_path) == (None, "made for other mount points than this run's")
    copy_for(tmp_path, big=["/no/such/big-file.so"])
    assert load(PLACES, tmp_path) == (None, "a big file it binds is not in this image")


def test_a_matching_copy_that_can_be_written_is_not_used(tmp_path: Path) -> None:
    copy_for(tmp_path)  # everything matches; only it is a writable folder here
    assert load(PLACES, tmp_path) == (None, "it is writable here")


def test_an_isolation_line_says_which_copy_and_why_not_the_shared_one(tmp_path: Path) -> None:
    own = task_root.Root(tmp_path, (), False)
    shared = task_root.Root(tmp_path, (), False, shared=True)
    assert "the worker's shared read-only tmpfs copy" in task_root.describe(shared)
    assert "the run's tmpfs copy (the worker's shared copy not used: it is writable here)" in \
        task_root.describe(own, "it is writable here")
