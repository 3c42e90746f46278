"""A worker host says at start-up whether its runs' test tasks get their own namespaces (issue
34.4): the probe finds them under the meta-test profile, and a host that refuses them (Docker's
default profile stands in for AppArmor or a kernel without user namespaces) logs a WARNING."""

from __future__ import annotations

import logging
import os

import pytest

from worker.isolation_probe import check_host_isolation

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")


def test_a_host_that_falls_back_says_so_at_start_up(docker_client, caplog):
    with caplog.at_level(logging.INFO, logger="worker.isolation_probe"):
        assert check_host_isolation(docker_client, IMAGE) is True
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert check_host_isolation(docker_client, IMAGE, profile=False) is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "falls back to shared namespaces" in warnings[0], warnings


def test_an_idle_celery_worker_probes_as_soon_as_it_is_ready(docker_client, tmp_path, caplog):
    """A Celery worker builds its runtime on its first job; the probe must not wait for one:
    the main process probes when Celery says the worker is ready, with no job taken."""
    import threading

    from celery.signals import worker_ready

    from worker.pipeline.wiring import probe_isolation_when_ready
    from worker.settings import WorkerSettings

    settings = WorkerSettings(default_image=IMAGE, sandbox_code_dir=tmp_path / "code",
                              data_dir=tmp_path / "data")
    before = {t.ident for t in threading.enumerate()}
    receivers = list(worker_ready.receivers or [])
    try:
        with caplog.at_level(logging.INFO, logger="worker.isolation_probe"):
            probe_isolation_when_ready(docker_client, settings)
            assert (tmp_path / "code" / "submission_api" / "runner" / "namespaces.py").is_file()
            worker_ready.send(sender=None)
            probes = [t for t in threading.enumerate()
                      if t.name == "arena-isolation-probe" and t.ident not in before]
            assert probes, "no probe started when the worker became ready"
            for thread in probes:
                thread.join(timeout=180)
        lines = [r.getMessage() for r in caplog.records]
        assert any("own namespaces per test task" in line for line in lines), lines
    finally:
        worker_ready.receivers = receivers
