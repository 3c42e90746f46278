"""The worker's dentry-cache reset before each run (issue 34; worker/dentry_reset.py): done first
(before the pre-fault), recorded in the run's isolation line whether done or not, and a host
where it cannot be done, or cannot separate runs (concurrent slots), says so at start-up. That
the reset closes the channel is shown in Docker: tests/integration/sandbox/
test_sandbox_dentry_reset.py."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from test_worker_execute import FakeDocker, request_for, sandbox_result

import worker.dentry_reset
import worker.prefault
import worker.sandbox
from submission_api.runner.task_server import MetaTestReport
from worker.dentry_reset import check_dentry_reset, reset_before_run
from worker.pipeline.execute import make_docker_executor
from worker.pipeline.score import read_isolation


def test_the_executor_resets_the_dentry_cache_before_the_prefault_and_records_it(
        monkeypatch, tmp_path: Path):
    drop = tmp_path / "drop_caches"
    drop.write_text("")
    monkeypatch.setattr(worker.dentry_reset, "DROP_CACHES", drop)
    seen: list[str] = []

    def prefault_run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(drop.read_text())
        return {}

    monkeypatch.setattr(worker.prefault, "prefault_run", prefault_run)
    monkeypatch.setattr(worker.sandbox, "run_sandbox", lambda *args, **kwargs:
                        sandbox_result(exit_code=1))
    request = request_for(tmp_path)
    assert request.answers_dir is not None
    request.answers_dir.mkdir()
    make_docker_executor(FakeDocker(), reset_dentries=True)(request, threading.Event())
    assert seen == ["2\n"]  # dropped, then pre-faulted (which reads back what the drop evicted)
    report = MetaTestReport(n_tasks=1, isolation="own namespaces per task", task_namespaces=True)
    (request.answers_dir / "meta_test.json").write_text(json.dumps(asdict(report)))
    line = read_isolation(request.answers_dir) or ""
    assert line.startswith("own namespaces per task; dentry cache reset before the run (")


def test_a_run_the_worker_could_not_reset_before_says_so_in_its_isolation_line(tmp_path: Path):
    refused = tmp_path / "read-only"
    refused.mkdir()  # opening a folder for writing fails, as a read-only /proc/sys does
    outcome = reset_before_run(True, tmp_path, refused)
    assert not outcome.done
    assert read_isolation(tmp_path) == outcome.line
    assert outcome.line.startswith("dentry cache NOT reset before the run (writing ")
    reset_before_run(False, tmp_path, refused)
    assert "NOT reset" in (read_isolation(tmp_path) or "")


@pytest.mark.parametrize(("writable", "slots", "warned"), [
    (False, 1, "worker.dentry_reset_unavailable"),
    (True, 2, "worker.dentry_reset_concurrent"),
    (True, 1, None),
])
def test_the_worker_warns_at_start_up_when_runs_here_are_not_separated(
        caplog: Any, tmp_path: Path, writable: bool, slots: int, warned: str | None):
    drop = tmp_path / "drop_caches"
    drop.write_text("")
    drop.chmod(0o200 if writable else 0o000)
    if not writable and worker.dentry_reset.unavailable_reason(drop) is None:
        drop = tmp_path / "absent"  # root may write any file: a host without the file instead
    with caplog.at_level(logging.INFO, logger="worker.dentry_reset"):
        check_dentry_reset(True, slots, drop)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith(warned)
        assert ("share it while they run" in warnings[0]) == (slots > 1)
