"""A worker host says at start-up whether its runs' test tasks get their own namespaces (issue
34.4): the probe finds them under the meta-test profile, and a host that refuses them (Docker's
default profile stands in for AppArmor or a kernel without user namespaces) logs a WARNING. A
probe container a killed worker left is swept by the next worker's start-up, as a run's is."""

from __future__ import annotations

import contextlib
import logging
import os

import pytest

from worker.isolation_probe import check_host_isolation

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")


def test_a_host_that_falls_back_says_so_at_start_up(docker_client, tmp_path, caplog):
    runs = tmp_path / "runs"
    with caplog.at_level(logging.INFO, logger="worker.isolation_probe"):
        assert check_host_isolation(docker_client, IMAGE, runs, "probe") is True
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert check_host_isolation(docker_client, IMAGE, runs, "probe", profile=False) is False
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


def test_a_probe_container_a_killed_worker_left_is_swept_at_the_next_start(
        docker_client, tmp_path, monkeypatch):
    """A worker killed while it probes never removes the probe's container (here: the driver's
    removal stubbed out, the container left exited as the kill would leave it). The next
    worker's start-up sweep on the same data folder removes it, as it removes a run's."""
    import threading

    from celery.signals import worker_ready

    import docker
    import worker.sandbox
    from worker.isolation_probe import PROBE
    from worker.pipeline.wiring import probe_isolation_when_ready
    from worker.settings import WorkerSettings
    from worker.sweep import sweep_at_start

    settings = WorkerSettings(default_image=IMAGE, sandbox_code_dir=tmp_path / "code",
                              data_dir=tmp_path / "data", executor="docker")
    sandboxes = {"label": "org.metadl-arena.role=sandbox"}
    before = {c.id for c in docker_client.containers.list(all=True, filters=sandboxes)}
    threads = {t.ident for t in threading.enumerate()}
    receivers = list(worker_ready.receivers or [])
    monkeypatch.setattr(worker.sandbox, "_remove", lambda container: None)
    left: list = []
    try:
        probe_isolation_when_ready(docker_client, settings)
        worker_ready.send(sender=None)
        for thread in threading.enumerate():
            if thread.name == "arena-isolation-probe" and thread.ident not in threads:
                thread.join(timeout=180)
        left = [c for c in docker_client.containers.list(all=True, filters=sandboxes)
                if c.id not in before and c.attrs["Config"]["Cmd"] == ["python3", "-c", PROBE]]
        assert [c.status for c in left] == ["exited"], [c.name for c in left]
        sweep_at_start(settings).close()
        for container in left:
            with pytest.raises(docker.errors.NotFound):
                container.reload()
    finally:
        worker_ready.receivers = receivers
        for container in left:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
