"""Limits that measure the submission's own work (issue 38.3): the clocks a run is charged by,
the backstop's kill as the host's fault, cores pinned per slot and oversubscription refused.
The same behaviour on a real loaded host: tests/integration/sandbox/test_sandbox_loaded_host.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from worker_fakes import make_claimed

import worker.sandbox
from submission_api.contract.usage import usage_from_json
from submission_api.contract.verdict import VerdictKind, decide_verdict
from worker.banner import StartupError, check_startup
from worker.cpu_plan import check_cpu_plan, slot_cpuset
from worker.pipeline.errors import PlatformFault
from worker.pipeline.execute import build_request, make_docker_executor
from worker.pipeline.score import build_record, decide_outcome, run_usage
from worker.pipeline.task_times import measure_task_times
from worker.sandbox_clock import LimitHit, StageBudget, limit_hit, read_stall_s
from worker.sandbox_config import SandboxLimits, SandboxSpec, build_container_kwargs
from worker.sandbox_result import SandboxResult
from worker.settings import WorkerSettings

PRESSURE = ("some avg10=1.00 avg60=0.50 avg300=0.10 total={}\n"
            "full avg10=0 avg60=0 avg300=0 total=7\n")


def result(**changes: Any) -> SandboxResult:
    return SandboxResult(**{"exit_code": 137, "oom_killed": False, "timed_out": False,
                            "wall_time_s": 30.0, "stdout": "", "stderr": "", **changes})


# --- the clocks --------------------------------------------------------------------------------

def test_a_run_over_its_cpu_time_is_stopped_whatever_its_wall_clock():
    assert limit_hit(10, 4, 30, wall_s=2, cpu_s=4.5, stall_s=0) is LimitHit.CPU


def test_time_spent_waiting_for_a_core_is_not_charged():
    # 25 s of wall, 20 of them waiting for a core: 5 s charged, under the 10 s limit
    assert limit_hit(10, 10, 30, wall_s=25, cpu_s=5, stall_s=20) is None
    # a sleeping run waits for no core: its wall clock is charged
    assert limit_hit(10, 10, 30, wall_s=10.5, cpu_s=0.1, stall_s=0) is LimitHit.WALL


def test_the_backstop_ends_a_starved_run_and_without_one_the_plain_wall_clock_is_charged():
    assert limit_hit(10, 10, 30, wall_s=31, cpu_s=5, stall_s=26) is LimitHit.BACKSTOP
    # no backstop configured (local mode, factor 1): stall ignored, as before issue 38.3
    assert limit_hit(10, None, None, wall_s=10.5, cpu_s=1, stall_s=10) is LimitHit.WALL


def test_the_stall_is_read_from_the_parent_cgroups_pressure(tmp_path: Path):
    group = tmp_path / "unified" / "arena-usage" / "abc"
    group.mkdir(parents=True)
    (tmp_path / "cpu" / "arena-usage" / "abc").mkdir(parents=True)  # v1: no pressure there
    (group / "cpu.pressure").write_text(PRESSURE.format(2_500_000))
    assert read_stall_s("/arena-usage/abc", tmp_path) == 2.5
    assert read_stall_s("/arena-usage/other", tmp_path) is None
    assert read_stall_s(None, tmp_path) is None


def test_the_stages_share_one_budget():
    budget = StageBudget(10, cpu_s=20, backstop_s=30)
    left = budget.after(result(wall_time_s=12, cpu_s=4, stall_s=8))
    assert (left.wall_s, left.cpu_s, left.backstop_s) == (6, 16, 18)
    assert left.server_s == 18 and not left.exhausted
    assert StageBudget(10).after(result(wall_time_s=12, stall_s=8)).exhausted


def test_a_stage_after_a_starved_one_runs_and_its_backstop_is_the_hosts_fault():
    """Two stages that waited 36 and 38 s of their 40 for a core leave 54 s of the 60 s charged
    wall clock but 10 s of the 90 s backstop. The next stage was refused (`backstop_s` below
    `wall_time_s`: a platform_error seen at load 30-40); it runs, and a kill at its backstop is
    the host's fault, not the participant's."""
    budget = StageBudget(60, cpu_s=60, backstop_s=90)
    left = budget.after(result(wall_time_s=40, cpu_s=2, stall_s=36))
    left = left.after(result(wall_time_s=40, cpu_s=1, stall_s=38))
    assert left.backstop_s is not None and left.backstop_s < left.wall_s and not left.exhausted
    limits = SandboxLimits(wall_time_s=left.wall_s, cpu_time_s=left.cpu_s,
                           backstop_s=left.backstop_s)
    assert limit_hit(limits.wall_time_s, limits.cpu_time_s, limits.backstop_s,
                     wall_s=left.backstop_s + 1, cpu_s=1, stall_s=0) is LimitHit.BACKSTOP


# --- the verdict (decide_verdict, through the worker's record) --------------------------------

def test_a_backstop_kill_is_the_platforms_and_never_charged(tmp_path: Path):
    starved = result(host_starved=True, limit_hit="backstop", cpu_s=3.0, stall_s=24.0)
    verdict = decide_verdict(build_record(starved, tmp_path, tmp_path))
    assert verdict.kind is VerdictKind.PLATFORM and not verdict.charged
    assert "waiting for a core" in verdict.message
    with pytest.raises(PlatformFault, match="too loaded"):
        decide_outcome(starved, tmp_path, tmp_path, score_output=print, log_cap_bytes=1024)


def test_a_run_over_its_cpu_time_is_charged_timed_out(tmp_path: Path):
    over = result(timed_out=True, limit_hit="cpu", cpu_s=181.0)
    verdict = decide_verdict(build_record(over, tmp_path, tmp_path, time_limit_s=90))
    assert verdict.kind is VerdictKind.TIMED_OUT and verdict.charged
    assert "CPU time (181 s)" in verdict.message


# --- cores per slot -----------------------------------------------------------------------------

def settings(**values: Any) -> WorkerSettings:
    return WorkerSettings(name="host", **values)


def test_each_slot_gets_its_own_cores():
    two = settings(concurrency=2, cpus_per_slot=2, host_cpus=[4, 5, 6, 7])
    assert [slot_cpuset(two, slot) for slot in (0, 1)] == ["4,5", "6,7"]
    assert slot_cpuset(settings(concurrency=2), 0) is None  # not pinned


def test_the_slots_cpuset_is_the_containers():
    spec = SandboxSpec(image="i", command=("true",), submission_dir=Path("/s"),
                       bundle_dir=None, output_dir=Path("/o"))
    kwargs = build_container_kwargs(spec, SandboxLimits(cpus=2, cpuset_cpus="6,7"))
    assert kwargs["cpuset_cpus"] == "6,7" and kwargs["nano_cpus"] == 2 * 10**9
    assert "cpuset_cpus" not in build_container_kwargs(spec, SandboxLimits())
    with pytest.raises(ValueError, match="cpuset_cpus"):
        SandboxLimits(cpuset_cpus="0;rm")


def test_the_executor_gives_the_sandbox_the_slots_cores_and_the_time_bounds(monkeypatch,
                                                                            tmp_path: Path):
    seen: dict[str, Any] = {}

    def fake_run_sandbox(client: Any, spec: Any, limits: Any, cancel: Any = None,
                         live_tail: Any = None) -> SandboxResult:
        seen["limits"] = limits
        return result(exit_code=1, wall_time_s=1.0)

    monkeypatch.setattr(worker.sandbox, "run_sandbox", fake_run_sandbox)
    claimed = make_claimed(b"zip", [], resources={"cpus": 2, "memory_mb": 1024},
                           time_limit_s=90)
    request = build_request(claimed, tmp_path / "s", tmp_path / "b", tmp_path / "o", (), 4096,
                            answers_dir=tmp_path / "a", cpuset="2,3", wall_backstop_factor=3)

    class Engine:
        class containers:  # noqa: N801 - the docker client's attribute
            @staticmethod
            def list(**_: Any) -> list[Any]:
                return []

    make_docker_executor(Engine(), prefault=False)(request, threading.Event())
    limits = seen["limits"]
    assert (limits.cpuset_cpus, limits.wall_time_s, limits.cpu_time_s, limits.backstop_s) == (
        "2,3", 90, 180, 270)


def test_a_run_wanting_more_cpus_than_its_slots_cores_is_handed_back(tmp_path: Path):
    claimed = make_claimed(b"zip", [], resources={"cpus": 2, "memory_mb": 1024})
    with pytest.raises(PlatformFault, match="needs 2 CPUs"):
        build_request(claimed, tmp_path, tmp_path, tmp_path, (), 4096, cpuset="3")


def test_a_worker_whose_slots_need_more_cores_than_its_host_has_refuses_to_start():
    with pytest.raises(StartupError, match="4 cores, but only 2"):
        check_startup(settings(concurrency=2, cpus_per_slot=2, host_cpus=[0, 1],
                               executor="local"), None)
    with pytest.raises(ValueError, match="3 cores, but only 2"):
        check_cpu_plan(settings(concurrency=3), cores=[0, 1])  # unpinned: a core a slot
    check_cpu_plan(settings(concurrency=2, cpus_per_slot=1), cores=[0, 1])
    assert check_startup(settings(concurrency=1, executor="local"), None).executor == "local"


# --- each test task's time, kept with the run ---------------------------------------------------

def test_each_test_tasks_time_is_read_from_the_answers_the_trusted_side_stored(tmp_path: Path):
    start = 1_000_000.0
    for task, ended in ((0, 0.5), (1, 0.6), (2, 1.6), (3, 1.7)):
        path = tmp_path / f"task_{task:05d}.npy"
        path.write_bytes(b"")
        os.utime(path, ns=(int((start + ended) * 1e9),) * 2)
    (tmp_path / "notes.txt").write_text("ignored")
    times = measure_task_times(tmp_path, start)
    assert times is not None
    assert (times.count, times.first_s, times.slowest_task) == (4, 0.5, 2)
    assert (times.median_s, times.max_s) == pytest.approx((0.5, 1.0))
    assert measure_task_times(tmp_path / "absent", start) is None
    usage = run_usage(result(task_times=times), scoring_start=start + 2)
    assert usage_from_json(usage.to_json()) == usage  # stored and read back as sent
