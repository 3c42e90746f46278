"""ARENA_WORKER_PREFAULT: on by default (every run pre-faults the image, its data and the code,
issue 34); a worker started with it off builds its Docker executor without the pre-fault (test
platforms that measure no page-cache isolation: the 1 GB image read took 8-12 s a run at load
35)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from worker.pipeline import wiring
from worker.settings import WorkerSettings


@pytest.mark.parametrize(("value", "expected"), [(None, True), ("0", False), ("1", True)])
def test_the_executor_pre_faults_as_the_setting_says(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, value, expected) -> None:
    if value is not None:
        monkeypatch.setenv("ARENA_WORKER_PREFAULT", value)
    built: dict = {}
    monkeypatch.setattr(wiring, "connect_docker", lambda: SimpleNamespace(ping=lambda: True))
    monkeypatch.setattr(wiring, "sync_sandbox_code", lambda target: tmp_path)
    monkeypatch.setattr(wiring, "_check_isolation_once", lambda *args: None)
    monkeypatch.setattr(wiring, "_check_dentry_reset_once", lambda settings: None)
    monkeypatch.setattr(wiring, "make_docker_executor",
                        lambda client, code_dir, **options: built.update(options) or "executor")
    wiring.build_sandbox(WorkerSettings(data_dir=tmp_path))
    assert built["prefault"] is expected
