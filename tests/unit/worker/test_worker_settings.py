"""Worker settings from ARENA_WORKER_* variables, and the slot wiring they drive."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from worker import local_executor
from worker.pipeline import wiring
from worker.pipeline.execute import ExecutionResult
from worker.pipeline.wiring import build_executor, build_runtime, compute_slot_gpus
from worker.settings import WorkerSettings


def test_settings_read_the_prefixed_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("ARENA_WORKER_BROKER_URL", "filesystem://")
    monkeypatch.setenv("ARENA_WORKER_QUEUES", '["phase-1", "gpu"]')
    monkeypatch.setenv("ARENA_WORKER_GPU_IDS", '["0", "1"]')
    monkeypatch.setenv("ARENA_WORKER_DATA_DIR", str(tmp_path))
    settings = WorkerSettings()
    assert settings.broker_url == "filesystem://"
    assert settings.queues == ["phase-1", "gpu"] and settings.pool_size == 2
    assert settings.cache_dir == tmp_path / "cache"


def test_empty_queue_list_is_refused_with_a_fix():
    with pytest.raises(ValidationError, match="ARENA_WORKER_QUEUES"):
        WorkerSettings(queues=[])


def test_each_pool_slot_owns_one_gpu():
    settings = WorkerSettings(gpu_ids=["3", "5"])
    assert [compute_slot_gpus(settings, slot) for slot in (0, 1, 2)] == [("3",), ("5",), ("3",)]
    assert compute_slot_gpus(WorkerSettings(), 0) == ()


REQUEST = SimpleNamespace(image="metadl-arena/sandbox:cpu")
RAN = ExecutionResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=1.0,
                      stdout="ran", stderr="")


def test_local_executor_setting_builds_the_unsandboxed_executor(monkeypatch: pytest.MonkeyPatch):
    calls = []
    monkeypatch.setattr(local_executor, "run_local", lambda *args: calls.append(args) or RAN)
    executor = build_executor(WorkerSettings(executor="local"))
    result = executor(REQUEST, "cancel")
    assert result.stdout == "ran" and "unsandboxed local mode" in result.stderr
    assert calls[0][:2] == (REQUEST, "cancel")


def test_docker_setting_without_an_engine_refuses_to_start(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(wiring, "connect_docker", lambda: None)
    with pytest.raises(RuntimeError, match="ARENA_WORKER_EXECUTOR"):
        build_executor(WorkerSettings(executor="docker"))


def test_auto_setting_without_an_engine_falls_back_to_local_mode(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(wiring, "connect_docker", lambda: None)
    monkeypatch.setattr(local_executor, "run_local", lambda *args: RAN)
    assert build_executor(WorkerSettings(executor="auto"))(REQUEST, "cancel").stdout == "ran"


def test_runtime_names_the_slot_and_uses_the_settings_folders(tmp_path: Path):
    settings = WorkerSettings(name="gpu-host", executor="local", data_dir=tmp_path,
                              gpu_ids=["0", "1"])
    runtime = build_runtime(settings, slot=1)
    name, instance = runtime.worker_name.split("@")
    assert name == "gpu-host/1" and runtime.gpu_ids == ("1",)
    host, pid, _ = instance.split(":")  # the lease owner is this process's (issue 32.6)
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())
    assert (runtime.cache_dir, runtime.runs_dir) == (tmp_path / "cache", tmp_path / "runs")
