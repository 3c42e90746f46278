"""A loaded host does not charge the participant (issue 38.3), with the real Docker driver and
the worker's own verdict (`build_record` -> `decide_verdict`).

The sandbox is pinned to one core (`cpuset_cpus`) and busy processes outside it are pinned to
the same core: the sandbox gets a fraction of it, as on a host at load 20 on 2 cores. Limits are
seconds, so each test is short. Needs the cgroupfs driver and cgroup pressure (PSI), as the
worker does to measure starvation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from submission_api.contract.verdict import VerdictKind, decide_verdict
from worker.pipeline.score import build_record
from worker.sandbox_clock import read_stall_s
from worker.sandbox_usage import PARENT, usage_parent

pytestmark = [pytest.mark.integration, pytest.mark.docker]

CORE = min(os.sched_getaffinity(0))
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
BUSY = "while True: pass"
WORK = """
import time
started = time.process_time()
while time.process_time() - started < {cpu_s}:
    pass
print("done", time.process_time())
"""


@contextmanager
def busy_processes(docker_client, count: int, core: int = CORE) -> Iterator[None]:
    """`count` busy loops beside the sandbox, pinned to `core`, in a container with `count`
    times a sandbox's CPU shares, in the cgroup that holds each sandbox's own parent: the
    sandbox gets 1/(count+1) of the core, whatever cgroup this test runs in. Busy loops started
    from here sat in another branch of the hierarchy, which the scheduler weighs as one group
    against the sandboxes': 1 s of CPU took 1.7-2.0 s beside 4 of them, under the 3 s limit,
    and the honest run's check skipped (every quiet whole run)."""
    loops = (f"import os\nfor _ in range({count - 1}):\n    if not os.fork():\n        break\n"
             f"{BUSY}\n")
    busy = docker_client.containers.run(
        IMAGE, ["python3", "-c", loops], detach=True, network_disabled=True,
        cpuset_cpus=str(core), cpu_shares=1024 * count, cgroup_parent=f"/{PARENT}",
        mem_limit="64m",
        labels={"org.metadl-arena.role": "test-load"}, user="65534:65534")
    try:
        yield
    finally:
        busy.remove(force=True)


@pytest.fixture
def measured_host(docker_client) -> None:
    parent = usage_parent(docker_client)
    if parent is None:
        pytest.fail("the engine's cgroup driver is not cgroupfs: the worker cannot read a run's "
                    "CPU time or stall (worker/sandbox_usage.py)")
    if not any(Path("/sys/fs/cgroup", sub, "cpu.pressure").exists() for sub in ("", "unified")):
        pytest.fail("no cgroup pressure (PSI) on this host: the worker cannot tell a starved run")
    assert read_stall_s(None) is None


def test_an_honest_cpu_bound_run_on_a_loaded_host_is_not_charged(run_script, measured_host,
                                                                  docker_client, tmp_path: Path):
    # 1 s of CPU; alone it ends in ~1.2 s. Beside 4 busy loops on its core it gets ~1/5 of it.
    with busy_processes(docker_client, 4):
        result = run_script(WORK.format(cpu_s=1.0), cpus=1.0, wall_time_s=3.0, cpu_time_s=3.0,
                            backstop_s=60.0, cpuset_cpus=str(CORE))
    assert result.ok, (result, result.stderr[-2000:])
    # beside 4 loops of 4x its shares: ~5 s (the check below needs the load to have mattered)
    assert result.wall_time_s > 3.0, f"the loops did not slow the run: {result.wall_time_s} s"
    # The plain wall clock passed the 3 s limit, which charged it `timed_out` before issue 38.3.
    assert result.stall_s is not None and result.stall_s > result.wall_time_s - 3.0, result
    assert decide_verdict(build_record(result, tmp_path, tmp_path)).kind is VerdictKind.SCORE


def test_a_run_starved_to_the_backstop_is_the_platforms_fault(run_script, measured_host,
                                                              docker_client, tmp_path: Path):
    with busy_processes(docker_client, 6):
        result = run_script(WORK.format(cpu_s=5.0), cpus=1.0, wall_time_s=4.0, cpu_time_s=6.0,
                            backstop_s=5.0, cpuset_cpus=str(CORE))
    assert result.host_starved and not result.timed_out, result
    verdict = decide_verdict(build_record(result, tmp_path, tmp_path))
    assert verdict.kind is VerdictKind.PLATFORM and not verdict.charged, verdict


def test_a_busy_loop_over_its_cpu_time_is_charged_timed_out(run_script, measured_host,
                                                            tmp_path: Path):
    result = run_script(BUSY, cpus=1.0, wall_time_s=30.0, cpu_time_s=1.5, backstop_s=90.0,
                        cpuset_cpus=str(CORE))
    assert result.timed_out and result.limit_hit == "cpu", result
    assert result.cpu_s is not None and result.cpu_s >= 1.5 and result.wall_time_s < 30, result
    verdict = decide_verdict(build_record(result, tmp_path, tmp_path, time_limit_s=1.5))
    assert verdict.kind is VerdictKind.TIMED_OUT and verdict.charged
    assert "CPU time" in verdict.message


def test_a_sleeping_run_is_still_charged_at_its_limit(run_script, measured_host,
                                                      tmp_path: Path):
    result = run_script("import time; time.sleep(600)", wall_time_s=2.0, cpu_time_s=2.0,
                        backstop_s=60.0)
    assert result.timed_out and result.limit_hit == "wall" and result.wall_time_s < 30, result
    assert decide_verdict(build_record(result, tmp_path, tmp_path)).kind is VerdictKind.TIMED_OUT
