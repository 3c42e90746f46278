"""The unsandboxed local executor: exit codes, time limit, cancel, capped logs, environment."""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

import pytest

import worker.local_executor
from worker.local_executor import (
    build_environment,
    make_local_executor,
    run_command,
    run_local,
)
from worker.pipeline.execute import ExecutionRequest, ExecutionResult


def make_request(tmp_path: Path, time_limit_s: float = 60, log_cap_bytes: int = 1024,
                 gpu_ids: tuple[str, ...] = ()) -> ExecutionRequest:
    return ExecutionRequest(run_id=1, image="unused", submission_dir=tmp_path,
                            bundle_dir=tmp_path / "bundle", output_dir=tmp_path / "output",
                            time_limit_s=time_limit_s, cpus=2, memory_mb=512, gpu_ids=gpu_ids,
                            log_cap_bytes=log_cap_bytes)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_exit_code_and_streams_are_reported(tmp_path: Path):
    code = "import sys; print('to out'); print('to err', file=sys.stderr); sys.exit(3)"
    result = run_command(python(code), make_request(tmp_path), threading.Event())
    assert (result.exit_code, result.timed_out, result.oom_killed) == (3, False, False)
    assert result.stdout == "to out\n" and result.stderr == "to err\n"


def is_running(pid: int) -> bool:
    """Whether a process is alive (a zombie waiting to be reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_process_over_its_time_limit_is_killed_with_its_children(tmp_path: Path):
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n")
    result = run_command([sys.executable, str(script)], make_request(tmp_path, time_limit_s=2),
                         threading.Event())
    assert result.timed_out
    assert result.exit_code is not None and result.exit_code < 0
    child = int(pid_file.read_text())
    # SIGKILL is delivered asynchronously: give the kernel a moment to end the grandchild.
    deadline = time.monotonic() + 10
    while is_running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_running(child)


def test_cancel_kills_the_process_without_calling_it_a_timeout(tmp_path: Path):
    cancel = threading.Event()
    cancel.set()
    result = run_command(python("import time; time.sleep(60)"), make_request(tmp_path), cancel)
    assert not result.timed_out and result.exit_code is not None and result.exit_code < 0


def test_logs_keep_head_and_tail_and_say_so(tmp_path: Path):
    code = "print('FIRST' + 'x' * 5000 + 'LAST')"
    result = run_command(python(code), make_request(tmp_path, log_cap_bytes=100),
                         threading.Event())
    assert result.stdout_truncated and result.stdout.startswith("FIRST")
    assert result.stdout.endswith("LAST\n") and "4910 bytes cut here" in result.stdout


def test_environment_is_explicit_and_pins_threads_and_gpus(tmp_path: Path):
    env = build_environment(make_request(tmp_path, gpu_ids=("1",)), tmp_path / "home")
    assert env["OMP_NUM_THREADS"] == "2" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert not any(key.startswith("ARENA_") for key in env)


def test_child_sees_no_worker_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARENA_SERVER_SECRET", "hunter2")
    code = "import os; print(os.environ.get('ARENA_SERVER_SECRET'))"
    result = run_command(python(code), make_request(tmp_path), threading.Event())
    assert result.stdout == "None\n"


def test_meta_train_stage_is_the_participant_runner_on_host_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    seen = []

    def fake_run_command(command, request, cancel, home=None):
        seen.append(command)
        return ExecutionResult(exit_code=1, oom_killed=False, timed_out=False, wall_time_s=0.1,
                               stdout="", stderr="")

    monkeypatch.setattr(worker.local_executor, "run_command", fake_run_command)
    request = make_request(tmp_path)
    request = ExecutionRequest(**{**request.__dict__, "answers_dir": tmp_path / "answers"})
    result = run_local(request, threading.Event(), "/usr/bin/python3")
    # A failed meta-train ends the run: no meta-test stage is started.
    assert result.exit_code == 1 and len(seen) == 1
    assert seen[0] == ["/usr/bin/python3", "-m", "submission_api.runner.participant",
                       "--submission", str(tmp_path), "--bundle", str(tmp_path / "bundle"),
                       "--output", str(tmp_path / "output")]


def test_building_the_local_executor_warns_loudly(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.ERROR, logger="worker.local_executor"):
        make_local_executor()
    assert any(r.message == "worker.executor.unsandboxed" and "trusted code only" in r.warning
               for r in caplog.records)
