"""`worker/task_root_cache.py`: which shared copies of the per-task root the worker keeps, and
when a copy is stale (issue 38)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from worker import task_root_cache
from worker.shutdown import WorkerStopped


def copy(base: Path, name: str, age_s: float) -> Path:
    folder = base / name
    folder.mkdir()
    lock = Path(f"{folder}.lock")
    lock.touch()
    os.utime(lock, (time.time() - age_s, time.time() - age_s))
    return folder


def test_an_image_change_prunes_the_least_recently_used_copies_but_not_one_in_use(
        tmp_path: Path) -> None:
    old = [copy(tmp_path, f"old{i}", 3600 - i) for i in range(3)]
    copy(tmp_path, "recent", 5)
    new = copy(tmp_path, "new", 0)

    task_root_cache._prune(tmp_path, new)

    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["new", "old2", "recent"]
    assert not Path(f"{old[0]}.lock").exists()


def test_a_copy_handed_out_lately_stays_beyond_the_limit(tmp_path: Path) -> None:
    busy = [copy(tmp_path, f"busy{i}", 10 - i) for i in range(3)]  # their runs may be starting
    new = copy(tmp_path, "new", 0)

    task_root_cache._prune(tmp_path, new)

    assert all(folder.is_dir() for folder in busy)


def test_the_code_digest_changes_with_the_code_not_with_its_bytecode(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text("A = 1\n")
    (tmp_path / "__pycache__").mkdir()
    first = task_root_cache.code_digest(tmp_path)
    (tmp_path / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"x")
    assert task_root_cache.code_digest(tmp_path) == first
    (tmp_path / "module.py").write_text("A = 22\n")
    assert task_root_cache.code_digest(tmp_path) != first


class _Client:
    class images:  # noqa: N801 - docker-py's shape
        @staticmethod
        def get(image: str) -> object:
            return type("Image", (), {"id": "sha256:" + "ab" * 32})()


def test_a_stop_while_the_copy_is_made_reaches_the_run_and_a_failed_maker_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's SIGTERM raises `WorkerStopped` wherever the slot is: during the copy it was
    logged as a failed maker and the run went on to its end instead of being released."""
    monkeypatch.setattr(task_root_cache.os, "geteuid", lambda: 0)
    (tmp_path / "code").mkdir()

    def stopped(*args: object) -> None:
        raise WorkerStopped("stopped")

    monkeypatch.setattr(task_root_cache, "make", stopped)
    with pytest.raises(WorkerStopped):
        task_root_cache.for_image(_Client(), "img", (), tmp_path / "code", tmp_path / "base")

    def broken(*args: object) -> None:
        raise RuntimeError("the copy's maker exited 1")

    monkeypatch.setattr(task_root_cache, "make", broken)
    assert task_root_cache.for_image(
        _Client(), "img", (), tmp_path / "code", tmp_path / "base") is None


def test_a_copy_pinned_by_a_slots_run_stays_however_long_ago_it_was_handed_out(
        tmp_path: Path) -> None:
    """A run binds its copy at meta-test, after meta-train: past `IN_USE_S` another image's
    worker pruned it ("bind source path does not exist", the e2e helper's runs at load 30)."""
    old = [copy(tmp_path, f"old{i}", 3600 - i) for i in range(3)]
    task_root_cache._pin(old[0])  # this slot's run, handed out an hour ago, still running
    new = copy(tmp_path, "new", 0)

    task_root_cache._prune(tmp_path, new)

    assert old[0].is_dir() and not old[1].is_dir()
    task_root_cache._pin(new)  # the slot's next run: the old copy is no longer pinned
    copy(tmp_path, "another", 3000)
    task_root_cache._prune(tmp_path, new)
    assert not old[0].is_dir() and old[2].is_dir()
