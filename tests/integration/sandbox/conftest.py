"""Fixtures for the Docker sandbox tests: a client, the offline image, and a one-call runner.

Without Docker or the image these tests skip with the reason, except under CI (env CI set),
where they fail: there a missing engine is a broken pipeline, not a reason to pass.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from docker.models.containers import ContainerCollection

import docker
from worker.sandbox import SandboxLimits, SandboxResult, SandboxSpec, run_sandbox

IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
HOW_TO = "run scripts/ensure_docker.sh and scripts/build_sandbox_image.sh"
RunScript = Callable[..., SandboxResult]
OWNER_LABEL = "org.metadl-arena.test-owner"
OWNER = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
"""This test process's mark on every container it makes through `docker_client`: the leak check
counts its own containers only, so other test processes' sandboxes (an xdist worker beside it,
another checkout on the host) can run meanwhile."""


class _OwnedContainers(ContainerCollection):
    def create(self, image, command=None, **kwargs):  # noqa: ANN001, ANN201 - docker-py's own
        labels = kwargs.get("labels") or {}
        labels = dict.fromkeys(labels, "") if isinstance(labels, list) else dict(labels)
        kwargs["labels"] = {**labels, OWNER_LABEL: OWNER}
        return super().create(image, command, **kwargs)


class OwnedClient(docker.DockerClient):
    """A Docker client whose containers carry `OWNER_LABEL` (`run` goes through `create`)."""

    @property
    def containers(self) -> ContainerCollection:
        return _OwnedContainers(client=self)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {reason}; {HOW_TO}")
    pytest.skip(f"{reason}; {HOW_TO}")


@pytest.fixture(scope="session")
def docker_client():
    try:
        client = OwnedClient.from_env()
        client.ping()
    except Exception as error:  # noqa: BLE001 - any failure means: no usable engine
        _unavailable(f"no Docker engine answers ({type(error).__name__}: {error})")
    try:
        client.images.get(IMAGE)
    except Exception:  # noqa: BLE001
        _unavailable(f"the sandbox image {IMAGE} is missing")
    return client


@pytest.fixture
def run_script(docker_client, tmp_path: Path) -> RunScript:
    """Run a Python source as /submission/main.py in the sandbox; returns the result record.

    The bundle holds `bundle.txt`; the host output folder is `tmp_path / "output"`.
    """

    def run(source: str, *args: str, mechanism: str = "auto", cancel=None,
            code_dir: Path | None = None, **limit_overrides) -> SandboxResult:
        submission = tmp_path / "submission"
        bundle = tmp_path / "bundle"
        submission.mkdir(exist_ok=True)
        bundle.mkdir(exist_ok=True)
        (submission / "main.py").write_text(source)
        (bundle / "bundle.txt").write_text("bundle data\n")
        limits = SandboxLimits(**{"memory_mb": 256, "cpus": 1.0, "pids": 64, "shm_mb": 16,
                                  "tmp_mb": 16, "output_mb": 16, "wall_time_s": 60.0,
                                  "log_cap_bytes": 64 * 1024, **limit_overrides})
        spec = SandboxSpec(image=IMAGE, command=("python3", "/submission/main.py", *args),
                           submission_dir=submission, bundle_dir=bundle,
                           output_dir=tmp_path / "output", env={"ARENA_TEST": "1"},
                           code_dir=code_dir)
        return run_sandbox(docker_client, spec, limits, output_mechanism=mechanism, cancel=cancel)

    return run


HEALTHY = """
import pathlib
print(pathlib.Path('/bundle/bundle.txt').read_text().strip())
pathlib.Path('/output/ok.txt').write_text('fine')
"""


@pytest.fixture(autouse=True)
def driver_still_works(request, docker_client, tmp_path_factory) -> Iterator[None]:
    """After every sandbox test, an ordinary run on the same client succeeds: nothing leaked.

    Only this process's containers that appeared during this test count (`OWNER_LABEL`)."""

    def sandboxes() -> set[str]:
        mine = ["org.metadl-arena.role=sandbox", f"{OWNER_LABEL}={OWNER}"]
        return {c.id for c in docker_client.containers.list(all=True, filters={"label": mine})}

    before = sandboxes()
    yield
    spare = tmp_path_factory.mktemp("healthy")
    for name in ("submission", "bundle"):
        (spare / name).mkdir()
    (spare / "submission" / "main.py").write_text(HEALTHY)
    (spare / "bundle" / "bundle.txt").write_text("bundle data\n")
    spec = SandboxSpec(image=IMAGE, command=("python3", "/submission/main.py"),
                       submission_dir=spare / "submission", bundle_dir=spare / "bundle",
                       output_dir=spare / "output")
    result = run_sandbox(docker_client, spec, SandboxLimits(memory_mb=256, wall_time_s=60.0))
    assert result.ok, f"a normal run failed after {request.node.name}: {result}"
    assert result.stdout == "bundle data\n"
    assert (spare / "output" / "ok.txt").read_text() == "fine"
    leftovers = sandboxes() - before
    assert leftovers == set(), f"containers left behind after {request.node.name}: {leftovers}"
