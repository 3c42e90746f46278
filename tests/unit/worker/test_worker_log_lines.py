"""The worker's log speaks (issue 24, traps 13-14): one `run.finished` line per run with its
score or reason and duration, a start-up banner naming executor (a WARNING when unsandboxed),
images, server, broker (password masked) and queues, a one-line refusal to start with
`--executor docker` and no engine, and the usual start-up noise demoted."""

from __future__ import annotations

import logging
import warnings

import pytest
from test_worker_evaluate import FakeExecutor, PredictingExecutor, run
from worker_fakes import FakeClient  # noqa: F401 - the fake_client fixture's type

from worker.banner import (
    StartupError,
    check_startup,
    log_banner,
    mask_url,
    quiet_known_noise,
)
from worker.log_format import EventFormatter
from worker.pipeline.errors import PlatformFault
from worker.pipeline.evaluate import RunResult
from worker.settings import WorkerSettings
from worker.sweep import sweep_at_start


def _lines(caplog, name: str) -> list[str]:
    formatter = EventFormatter("%(levelname)s %(name)s %(message)s")
    return [formatter.format(r) for r in caplog.records if r.getMessage().startswith(name)]


def test_a_finished_run_is_one_line_with_its_score_and_duration(fake_client, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    assert run(fake_client, tmp_path, PredictingExecutor()) is RunResult.PUBLISHED
    [line] = _lines(caplog, "run.finished")
    assert "state='finished'" in line and "score=0.75" in line and "duration_s=" in line
    assert "run_id=7" in line and "result='published'" in line
    [claimed] = _lines(caplog, "run.claimed")
    assert "time_limit_s=" in claimed and "image=" in claimed


def test_a_failed_or_released_run_says_why(fake_client, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    run(fake_client, tmp_path, FakeExecutor())  # no predictions: the participant's failure
    [line] = _lines(caplog, "run.finished")
    assert line.startswith("WARNING") and "reason='bad_predictions'" in line
    caplog.clear()
    run(fake_client, tmp_path, FakeExecutor(error=PlatformFault("engine gone")))
    [line] = _lines(caplog, "run.finished")
    assert "state='released'" in line and "engine gone" in line


def test_docker_executor_without_an_engine_refuses_to_start_in_one_line(tmp_path):
    settings = WorkerSettings(executor="docker", data_dir=tmp_path)
    with pytest.raises(StartupError) as caught:
        check_startup(settings, None)
    message = str(caught.value)
    assert "\n" not in message and "no Docker engine answers" in message
    assert "ARENA_WORKER_EXECUTOR=auto" in message  # the fix


def test_the_banner_warns_loudly_when_runs_would_be_unsandboxed(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    settings = WorkerSettings(executor="auto", data_dir=tmp_path, queues=["gpu", "arena"],
                              broker_url="redis://:hunter2@redis:6379/1",
                              server_url="http://arena:8000")
    log_banner(settings, check_startup(settings, None))
    [warning] = _lines(caplog, "worker.unsandboxed")
    assert warning.startswith("WARNING") and "UNSANDBOXED" in warning
    [ready] = _lines(caplog, "worker.ready")
    assert "server='http://arena:8000'" in ready and "queues=['gpu', 'arena']" in ready
    assert "hunter2" not in ready and "redis://:***@redis:6379/1" in ready


def test_mask_url_hides_only_the_password():
    assert mask_url("redis://user:pw@h:1/2") == "redis://user:***@h:1/2"
    assert mask_url("filesystem://") == "filesystem://"


def test_a_clean_start_sweep_and_known_noise_stay_below_info(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    settings = WorkerSettings(executor="local", data_dir=tmp_path)
    sweep_at_start(settings).close()
    assert _lines(caplog, "worker.sweep.done") == []
    quiet_known_noise()
    logging.getLogger("kombu.connection").warning("No hostname was supplied. Reverting")
    assert _lines(caplog, "No hostname") == []
    with warnings.catch_warnings(record=True) as caught:
        quiet_known_noise()
        warnings.warn("You're running the worker with superuser privileges: this is\n"
                      "absolutely not recommended!", RuntimeWarning, stacklevel=1)
    assert caught == []
