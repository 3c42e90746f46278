"""The cooc cheat with its memory in the page cache (issue 34.1): read in place from pages that
start out evicted, its counters carry between tasks and it scores far above chance; read from the
run's private tmpfs copy (as the supervisor makes it before the first task) every page is resident
from the start, every counter reads full and it scores at chance. The platform test
(`tests/e2e/test_task_isolation_platform.py`) runs the same submission through the worker."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner import private_copy
from submission_api.runner.prepare import prepare_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from isolation_page_cache_attack import score_with_page_cache, write_attack  # noqa: E402

PROTOCOL = {"name": "fixed", "n_ways": 2, "n_shots": 5, "n_queries": 20,
            "tasks_per_dataset": 30, "test_pools": "per_run"}
"""Every class's whole support pool in every task (5 of its 25 images), so a class has one name
across tasks; 60 tasks."""


def test_the_page_cache_carries_the_cheat_only_where_read_in_place(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    space = Path("/dev/shm")
    if not private_copy.is_tmpfs(space):
        pytest.skip("no tmpfs at /dev/shm here")
    if shutil.disk_usage(space).free < 256 << 20:  # a container's default /dev/shm is 64 MiB
        pytest.skip(f"/dev/shm holds {shutil.disk_usage(space).free >> 20} MiB here, less than "
                    "the private copies of the 32 MiB attack and its learner need")
    prepare_run(load_collection(tiny_collection, arena_cache),
                ProtocolParams.from_dict(PROTOCOL), (0, 0), tmp_path / "bundle",
                tmp_path / "answers")
    attack = write_attack(tmp_path / "attack", size_mb=32)
    # Control: in place, pages evicted at the start (host memory pressure): 0.85 measured.
    assert score_with_page_cache(attack, tmp_path / "learner", tmp_path / "answers") > 0.5
    copied = score_with_page_cache(attack, tmp_path / "learner2", tmp_path / "answers",
                                   copy_space=space)
    assert abs(copied) < 0.02
