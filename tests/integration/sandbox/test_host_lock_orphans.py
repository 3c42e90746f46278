"""A slot killed mid-run lets go of the host lock (its flock dies with its process) while its
sandbox container runs on under the Docker daemon, with nobody enforcing its clock. A secret
phase's run that then takes the host exclusively would run beside it, though the lock promises
it the host alone (worker/host_lock.py). The worker's exclusive hold first removes what this data
folder's killed slots left running; another data folder's containers are not its own.

The kill is real: a child process holds the host lock shared, as a slot's ordinary run does,
runs the sandbox driver on a sleeping container and is SIGKILLed while the container runs.
"""

from __future__ import annotations

import os
import textwrap
import threading
import uuid

import pytest

import docker
from tests.integration.sandbox.test_worker_sweep import (  # noqa: F401
    kill_once_running,
    names,
    stray_container,
)
from worker.pipeline import wiring
from worker.pipeline.execute import compute_deployment_id
from worker.settings import WorkerSettings

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")  # as conftest.py

DYING_SLOT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from worker.host_lock import HostLock
    from worker.sandbox import SandboxLimits, SandboxSpec, run_sandbox
    import docker

    lock, work, name, image = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    for folder in ("submission", "bundle"):
        (work / folder).mkdir(parents=True)
    spec = SandboxSpec(image=image, command=("sleep", "300"), submission_dir=work / "submission",
                       bundle_dir=work / "bundle", output_dir=work / "output", name=name)
    with HostLock(lock, slots=2).hold(exclusive=False):
        run_sandbox(docker.from_env(), spec, SandboxLimits(memory_mb=64, wall_time_s=300),
                    output_mechanism="watchdog")
""")


def test_an_exclusive_hold_removes_what_a_killed_slot_left_running(docker_client, tmp_path,
                                                                   names,  # noqa: F811
                                                                   monkeypatch):
    # the composition root's start-up checks are not what this test is about
    monkeypatch.setattr(wiring, "_ISOLATION_CHECKED", _already_set())
    monkeypatch.setattr(wiring, "_DENTRY_RESET_CHECKED", _already_set())
    settings = WorkerSettings(data_dir=tmp_path / "data", executor="docker", concurrency=2,
                              server_url=f"http://arena-{uuid.uuid4().hex[:8]}.test:8000")
    deployment = compute_deployment_id(settings.server_url)
    dead = f"arena-{deployment}-run-7-1-{uuid.uuid4().hex[:8]}-meta-test"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_folder = f"arena-{deployment}-run-8-1-{uuid.uuid4().hex[:8]}"
    names.extend([dead, other_folder])
    kill_once_running(docker_client, [DYING_SLOT, str(settings.host_lock_path),
                                      str(settings.runs_dir / "run-7-dead"), dead, IMAGE], dead)
    stray_container(docker_client, other_folder, elsewhere)  # another data folder's worker
    assert docker_client.containers.get(dead).status == "running"

    runtime = wiring.build_runtime(settings, 0)
    assert runtime.host_lock is not None
    with runtime.host_lock.hold(exclusive=True) as hold:
        assert hold is not None and hold.exclusive
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(dead)
    assert docker_client.containers.get(other_folder).status == "running"  # not this folder's

    with runtime.host_lock.hold(exclusive=False) as hold:  # an ordinary run removes nothing
        assert hold is not None
    assert docker_client.containers.get(other_folder).status == "running"


def _already_set() -> threading.Event:
    event = threading.Event()
    event.set()
    return event
