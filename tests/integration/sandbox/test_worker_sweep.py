"""Issue 13 (5): what a worker killed mid-run leaves (its run folder with the answers, the
loop-mounted output image, the running sandbox container) is swept when a worker starts on the
same data folder, and nothing of another deployment or another data folder is touched.

The kill is real: a child process runs the sandbox driver on a sleeping container and is
SIGKILLed while the container runs, as a worker's pool process would be.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

import docker
from worker.sandbox_config import CONTAINER_LABELS
from worker.sandbox_output import pick_mechanism
from worker.sweep import (
    detach_loop_devices_for,
    hold_runs_lock,
    mounts_under,
    release_to_shared,
    sweep_orphans,
)

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")  # as conftest.py

DYING_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from worker.sandbox import SandboxLimits, SandboxSpec, run_sandbox
    import docker

    work, name, image = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    for folder in ("submission", "bundle", "answers"):
        (work / folder).mkdir(parents=True)
    (work / "answers" / "query_labels.npy").write_bytes(b"labels")
    spec = SandboxSpec(image=image, command=("sleep", "300"), submission_dir=work / "submission",
                       bundle_dir=work / "bundle", output_dir=work / "output", name=name)
    run_sandbox(docker.from_env(), spec, SandboxLimits(memory_mb=64, wall_time_s=300),
                output_mechanism=sys.argv[4])
""")


def start_and_kill_a_worker(docker_client: docker.DockerClient, work: Path, name: str,
                            mechanism: str) -> None:
    """Run the driver in a child process, SIGKILL it once its container runs."""
    kill_once_running(docker_client, [DYING_WORKER, str(work), name, IMAGE, mechanism], name)


def kill_once_running(docker_client: docker.DockerClient, script: list[str], name: str) -> None:
    """Run `python -c *script` in a child process, SIGKILL it once container `name` runs."""
    child = subprocess.Popen([sys.executable, "-c", *script],
                             cwd=Path(__file__).resolve().parents[3])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if docker_client.containers.get(name).status == "running":
                break
        except docker.errors.NotFound:
            pass
        time.sleep(0.2)
    else:
        child.kill()
        pytest.fail(f"the dying process's container {name} never ran")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()


def stray_container(docker_client: docker.DockerClient, name: str, source: Path):
    return docker_client.containers.run(IMAGE, ["sleep", "300"], name=name, detach=True,
                                        labels=dict(CONTAINER_LABELS), network_mode="none",
                                        volumes={str(source): {"bind": "/data", "mode": "ro"}})


@pytest.fixture
def names(docker_client):
    made: list[str] = []
    yield made
    for name in made:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.containers.get(name).remove(force=True)


def test_a_killed_workers_container_mount_and_run_folder_are_swept(docker_client, tmp_path,
                                                                   names):
    if os.geteuid() != 0 or pick_mechanism() != "loop":
        pytest.skip("the loop-mounted output (what a dead worker leaves mounted) needs root and "
                    "loop devices (/dev/loop-control, mkfs.ext4); this host has none")
    deployment = uuid.uuid4().hex[:8]
    runs = tmp_path / "runs"
    work = runs / "run-7-dead"
    dead = f"arena-{deployment}-run-7-1-{uuid.uuid4().hex[:8]}"
    other_deployment = f"arena-{uuid.uuid4().hex[:8]}-run-7-1-x"
    other_folder = f"arena-{deployment}-run-8-1-{uuid.uuid4().hex[:8]}"
    names.extend([dead, other_deployment, other_folder])
    start_and_kill_a_worker(docker_client, work, dead, "loop")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    stray_container(docker_client, other_deployment, runs)  # another server's worker
    stray_container(docker_client, other_folder, elsewhere)  # another data folder's worker

    assert (work / "answers" / "query_labels.npy").exists()  # the litter the issue found
    assert mounts_under(runs.resolve()) and detach_loop_devices_for(runs.resolve())
    assert docker_client.containers.get(dead).status == "running"

    lock, exclusive = hold_runs_lock(runs)
    assert exclusive
    report = sweep_orphans(docker_client, deployment, runs)
    release_to_shared(lock)

    assert report.containers == [dead]
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(dead)
    assert docker_client.containers.get(other_deployment).status == "running"
    assert docker_client.containers.get(other_folder).status == "running"
    assert mounts_under(runs.resolve()) == []
    assert detach_loop_devices_for(runs.resolve()) == []
    assert not work.exists() and report.folders == ["run-7-dead"]
    lock.close()


def test_a_worker_sharing_a_live_workers_folder_does_not_sweep_it(tmp_path):
    first, exclusive = hold_runs_lock(tmp_path / "runs")
    assert exclusive
    release_to_shared(first)
    second, exclusive = hold_runs_lock(tmp_path / "runs")
    assert not exclusive  # a replica alive there: its run folders are not litter
    second.close()
    first.close()
    third, exclusive = hold_runs_lock(tmp_path / "runs")
    assert exclusive  # every earlier worker is gone: sweep
    third.close()
