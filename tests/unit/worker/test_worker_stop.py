"""Stopping a worker (issue 24, trap 15): the first Ctrl-C's line says which run it waits for
and how long that may take; the second makes the pool process abort its run as a platform
fault, which the pipeline releases (requeued, uncharged) instead of leaving it to its lease."""

from __future__ import annotations

import signal

import pytest
from test_worker_evaluate import FakeExecutor, run

from worker.pipeline.errors import PlatformFault
from worker.pipeline.evaluate import RunResult
from worker.shutdown import WorkerStopped, describe_stop, runs_in_progress, stop_current_run


def test_the_first_ctrl_c_names_the_run_and_the_longest_wait(tmp_path):
    (tmp_path / "run-12-abcd").mkdir()
    (tmp_path / "cache").mkdir()
    assert runs_in_progress(tmp_path) == [12]
    line = describe_stop([12], 5 * 3600)
    assert "waiting for run 12" in line and "at most 5 h" in line
    assert "Ctrl-C again" in line and "not charged" in line
    assert "no run in progress" in describe_stop([], 3600)


def test_the_second_ctrl_c_aborts_the_run_as_a_platform_fault():
    assert issubclass(WorkerStopped, PlatformFault)
    with pytest.raises(WorkerStopped):
        stop_current_run(signal.SIGTERM, None)


def test_a_run_stopped_that_way_is_released_not_charged(fake_client, tmp_path):
    stopped = WorkerStopped("the worker was stopped")
    assert run(fake_client, tmp_path, FakeExecutor(error=stopped)) is RunResult.RELEASED
    assert fake_client.named("finish") == []
    assert len(fake_client.named("release")) == 1
