"""Execute: the request built from a claim, the heartbeat, and the Docker sandbox adapter."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from worker_fakes import make_claimed

import worker.sandbox
from submission_api.runner.stages import meta_train_command
from worker.live_tail import LiveTail
from worker.pipeline.errors import PlatformFault
from worker.pipeline.execute import (
    ExecutionRequest,
    Heartbeat,
    build_request,
    make_docker_executor,
)
from worker.sandbox_result import SandboxPlatformError, SandboxResult

WAIT_S = 10.0  # an upper bound for a background thread to act, never a timing assertion


def claimed_with(gpus: int = 0):
    return make_claimed(b"zip", [], resources={"cpus": 3.5, "memory_mb": 2048, "gpus": gpus,
                                               "pids": 48, "shm_mb": 32, "tmp_mb": 64,
                                               "output_mb": 100},
                        time_limit_s=90)


def request_for(tmp_path: Path, gpu_ids: tuple[str, ...] = ()) -> ExecutionRequest:
    return build_request(claimed_with(len(gpu_ids)), tmp_path / "s", tmp_path / "b",
                         tmp_path / "o", gpu_ids, 4096, answers_dir=tmp_path / "a")


def test_request_takes_limits_from_the_phase_and_gpus_from_the_slot(tmp_path: Path):
    request = build_request(claimed_with(gpus=1), tmp_path / "s", tmp_path / "b", tmp_path / "o",
                            ("2", "3"), 4096)
    assert (request.time_limit_s, request.cpus, request.memory_mb, request.gpu_ids) == (
        90, 3.5, 2048, ("2",))
    assert request.threads == 3
    assert request.name.startswith("arena-local-run-7-3-")


def test_phase_without_an_image_runs_the_workers_default_image(tmp_path: Path):
    claimed = claimed_with().model_copy(update={"image": None})
    request = build_request(claimed, tmp_path, tmp_path, tmp_path, (), 4096, "my/sandbox:1")
    assert request.image == "my/sandbox:1"


def test_cpu_phase_gets_no_gpu_even_on_a_gpu_slot(tmp_path: Path):
    request = build_request(claimed_with(gpus=0), tmp_path, tmp_path, tmp_path, ("0",), 4096)
    assert request.gpu_ids == ()


def test_phase_needing_more_gpus_than_the_slot_owns_is_a_platform_fault(tmp_path: Path):
    with pytest.raises(PlatformFault, match="needs 1 GPU"):
        build_request(claimed_with(gpus=1), tmp_path, tmp_path, tmp_path, (), 4096)


def test_heartbeat_409_sets_lost_and_cancel_and_stops_beating():
    stages: list[str] = []

    def beat(stage: str) -> bool:
        stages.append(stage)
        return len(stages) < 3

    with Heartbeat(beat, interval_s=0.01, stage="running") as heartbeat:
        assert heartbeat.cancel.wait(WAIT_S)
    assert heartbeat.lost.is_set()
    assert stages == ["running"] * 3


def test_heartbeat_survives_network_errors():
    answers: list[Any] = [RuntimeError("connection reset"), True, False]

    def beat(stage: str) -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with Heartbeat(beat, interval_s=0.01, stage="preparing") as heartbeat:
        assert heartbeat.lost.wait(WAIT_S)
    assert answers == []


def test_heartbeat_stops_on_exit_without_losing_the_run():
    with Heartbeat(lambda stage: True, interval_s=0.01, stage="running") as heartbeat:
        pass
    assert not heartbeat.lost.is_set() and not heartbeat.cancel.is_set()


class FakeContainer:
    def __init__(self, name: str, removed: list[str]) -> None:
        self.name, self._removed = name, removed

    def remove(self, force: bool = False) -> None:
        assert force
        self._removed.append(self.name)


class FakeContainers:
    """Containers left behind by killed attempts: the executor must reap only its run's."""

    def __init__(self, names: tuple[str, ...] = ()) -> None:
        self.removed: list[str] = []
        self.names = names

    def list(self, all: bool, filters: dict[str, str]) -> list[FakeContainer]:  # noqa: A002
        assert all
        return [FakeContainer(n, self.removed) for n in self.names if filters["name"] in n]


class FakeDocker:
    def __init__(self, names: tuple[str, ...] = ()) -> None:
        self.containers = FakeContainers(names)


def sandbox_result(**changes: Any) -> SandboxResult:
    values = {"exit_code": 0, "oom_killed": False, "timed_out": False, "wall_time_s": 1.5,
              "stdout": "out", "stderr": "err", "stdout_truncated": False,
              "stderr_truncated": True, "output_exceeded": False, **changes}
    return SandboxResult(**values)


def test_docker_executor_passes_spec_and_limits_and_copies_the_result(monkeypatch, tmp_path):
    seen: dict[str, Any] = {}

    def fake_run_sandbox(client: Any, spec: Any, limits: Any, cancel: Any = None,
                         live_tail: Any = None) -> SandboxResult:
        seen.update(spec=spec, limits=limits)
        return sandbox_result(exit_code=3)

    monkeypatch.setattr(worker.sandbox, "run_sandbox", fake_run_sandbox)
    request = request_for(tmp_path, gpu_ids=("1",))
    result = make_docker_executor(FakeDocker(), prefault=False)(request, threading.Event())
    spec, limits = seen["spec"], seen["limits"]
    # A failed meta-train stage ends the run; its sandbox is the only one started.
    assert spec.image == "arena/sandbox:cpu"
    assert spec.command == tuple(meta_train_command("python3", "/submission", "/bundle",
                                                    "/output"))
    assert (spec.submission_dir, spec.bundle_dir, spec.output_dir) == (
        (tmp_path / "s").resolve(), (tmp_path / "b").resolve(), (tmp_path / "o").resolve())
    assert spec.name == f"{request.name}-meta-train" and spec.env["OMP_NUM_THREADS"] == "3"
    assert spec.env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"  # runner/heap.py
    assert (limits.memory_mb, limits.cpus, limits.wall_time_s, limits.gpus) == (
        2048, 3.5, 90, ("1",))
    assert (limits.pids, limits.shm_mb, limits.tmp_mb, limits.output_mb) == (48, 32, 64, 100)
    assert (result.exit_code, result.stderr, result.stderr_truncated) == (3, "err", True)


def test_docker_executor_hands_the_cancel_event_to_the_sandbox(monkeypatch, tmp_path):
    # The driver kills on cancel and reports `cancelled`; a kill from outside would read as OOM.
    # It also tees the output into the request's live tail, which the heartbeat sends.
    seen: dict[str, Any] = {}

    def recording(client: Any, spec: Any, limits: Any, cancel: Any = None,
                  live_tail: Any = None) -> SandboxResult:
        seen.update(cancel=cancel, live_tail=live_tail)
        return sandbox_result(exit_code=137, cancelled=True)

    monkeypatch.setattr(worker.sandbox, "run_sandbox", recording)
    cancel = threading.Event()
    request = replace(request_for(tmp_path), live_tail=LiveTail())
    make_docker_executor(FakeDocker(), prefault=False)(request, cancel)
    assert seen["cancel"] is cancel and seen["live_tail"] is request.live_tail
    assert request.live_tail.text() == "==> meta-train <==\n"  # the worker's stage mark


def test_containers_left_by_a_killed_attempt_of_the_run_are_reaped(monkeypatch, tmp_path):
    request = request_for(tmp_path)
    mine = f"arena-local-run-{request.run_id}-3-abc"
    # Another run of this deployment, and the same run id of another deployment on this engine.
    others = (f"arena-local-run-{request.run_id}9-1-def",
              f"arena-0badc0de-run-{request.run_id}-3-x")
    docker_client = FakeDocker((mine, *others))
    monkeypatch.setattr(worker.sandbox, "run_sandbox",
                        lambda client, spec, limits, cancel=None, live_tail=None:
                        sandbox_result(exit_code=1))
    make_docker_executor(docker_client, prefault=False)(request, threading.Event())
    assert docker_client.containers.removed == [mine]


def test_sandbox_platform_error_becomes_a_platform_fault(monkeypatch, tmp_path):
    def broken(client: Any, spec: Any, limits: Any, cancel: Any = None,
               live_tail: Any = None) -> SandboxResult:
        raise SandboxPlatformError("engine gone")

    monkeypatch.setattr(worker.sandbox, "run_sandbox", broken)
    with pytest.raises(PlatformFault, match="engine gone"):
        make_docker_executor(FakeDocker(), prefault=False)(request_for(tmp_path), threading.Event())


def test_progress_reports_test_tasks_from_the_trusted_side_first(tmp_path):
    from worker.pipeline.progress import read_progress

    (tmp_path / "output").mkdir()
    assert read_progress(tmp_path) is None
    (tmp_path / "output" / "progress.json").write_text('{"stage": "meta_fit", "done": 7}')
    assert read_progress(tmp_path) == {"step": "meta_fit", "tasks_done": None,
                                       "tasks_total": None}
    (tmp_path / "progress.json").write_text('{"stage": "meta_test", "done": 3, "total": 40}')
    assert read_progress(tmp_path) == {"step": "meta_test", "tasks_done": 3, "tasks_total": 40}


def test_progress_written_by_participant_code_is_read_as_untrusted(tmp_path):
    from worker.pipeline.progress import read_progress

    (tmp_path / "output").mkdir()
    os.mkfifo(tmp_path / "output" / "progress.json")  # would block a naive open forever
    assert read_progress(tmp_path) is None
    (tmp_path / "output" / "progress.json").unlink()
    (tmp_path / "output" / "progress.json").write_text("[1, 2]")
    assert read_progress(tmp_path) is None


def test_a_run_that_ends_in_meta_train_says_all_of_its_log_is_meta_trains(tmp_path: Path):
    """The owner of a secret phase reads the finish body's `meta_train_log`; a run that never
    reached meta-test must still carry it (its whole log), not None (withheld whole)."""
    from worker.pipeline.execute import run_two_stages
    from worker.pipeline.score import format_meta_train_log

    stages: list[str] = []

    def run_stage(stage, command, budget, bundle_dir, mounts, output_dir):
        stages.append(stage)
        return SandboxResult(exit_code=1, oom_killed=False, timed_out=False, wall_time_s=0.5,
                             stdout="epoch 1\n", stderr="Traceback: ValueError in meta_fit\n")

    paths = {"python": "python3", "submission": "/s", "bundle": "/b", "output": "/o",
             "learner": "/l", "channel": "/c", "scratch": "/t", "sandboxed": "1"}
    result = run_two_stages(request_for(tmp_path), threading.Event(), run_stage, paths)
    assert stages == ["meta-train"]
    train_log = format_meta_train_log(result, 4096)
    assert train_log is not None
    assert "ValueError in meta_fit" in train_log and "epoch 1" in train_log


@pytest.mark.parametrize(("stall_s", "cpu_s", "starved"), [(269.0, 1.0, True), (0.0, 1.0, False)])
def test_a_meta_train_that_spent_only_the_backstop_waiting_for_a_core_is_not_charged(
        tmp_path: Path, stall_s: float, cpu_s: float, starved: bool):
    """90 s limit, backstop 3x: meta-train ran 270 s of plain wall clock. When 269 s of it was a
    wait for a core, only the backstop is spent (the host's fault: retried, never charged); it
    was `timed_out`, charged to the participant. Without the wait it is theirs, as before."""
    from worker.pipeline.execute import run_two_stages

    request = replace(request_for(tmp_path), wall_backstop_factor=3.0)
    stages: list[str] = []

    def run_stage(stage, command, budget, bundle_dir, mounts, output_dir):
        stages.append(stage)
        return SandboxResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=270.0,
                             stdout="", stderr="", stall_s=stall_s, cpu_s=cpu_s)

    paths = {"python": "python3", "submission": "/s", "bundle": "/b", "output": "/o",
             "learner": "/l", "channel": "/c", "scratch": "/t", "sandboxed": "1"}
    result = run_two_stages(request, threading.Event(), run_stage, paths)
    assert stages == ["meta-train"]
    assert (result.host_starved, result.timed_out) == (starved, not starved)
    assert result.limit_hit == ("backstop" if starved else "wall")
