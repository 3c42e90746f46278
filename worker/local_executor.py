"""Unsandboxed local mode: the participant side as a plain subprocess, for TRUSTED CODE ONLY.

The embedded default falls back to this when no Docker engine is reachable, so that one machine
can run a demo or a private competition without Docker. It enforces the wall-clock limit (the
whole process group is killed) and nothing else: no memory, network or file-system isolation
(an OOM kill by the host is still recognised, from the cgroup's count).
The submission can read everything the worker's user can, including other runs' answers. That
is why building it logs an error-level warning, and why it is opt-in by configuration
(`ARENA_WORKER_EXECUTOR=local`, or `auto` without Docker).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from submission_api.runner.heap import with_huge_pages
from submission_api.runner.limited import run_limited
from worker.pipeline.execute import (
    ExecutionRequest,
    ExecutionResult,
    Executor,
    StageBudget,
    run_two_stages,
)

log = logging.getLogger(__name__)

WARNING = ("UNSANDBOXED LOCAL MODE: submissions run as plain processes of the worker's user, "
           "with no isolation. Use it for trusted code only; install Docker for anything else.")


def make_local_executor(python: str = sys.executable) -> Executor:
    """An executor running the participant side with `python` on host paths; warns loudly."""
    log.error("worker.executor.unsandboxed", extra={"warning": WARNING})

    def execute(request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        return run_local(request, cancel, python)

    return execute


def build_environment(request: ExecutionRequest, home: Path) -> dict[str, str]:
    """A small, explicit environment: the worker's own (and its secrets) is not passed on."""
    threads = str(request.threads)
    return with_huge_pages({
        "PATH": os.defpath, "HOME": str(home), "TMPDIR": str(home), "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        "CUDA_VISIBLE_DEVICES": ",".join(request.gpu_ids)})


def run_local(request: ExecutionRequest, cancel: threading.Event,
              python: str = sys.executable) -> ExecutionResult:
    """Run both stages (as the sandbox does, with host paths) until they end, the time limit
    passes, or `cancel` is set."""
    def run_stage(stage: str, command: tuple[str, ...], budget: StageBudget,
                  _bundle: Path | None, _mounts: tuple[tuple[Path, str], ...],
                  output_dir: Path) -> ExecutionResult:
        # Meta-test tasks get the scratch folder the supervisor empties after each one as HOME.
        home = output_dir if stage == "meta-test" else None
        # No cgroup of its own to read: the plain wall clock is the charged one.
        return run_command(list(command), replace(request, time_limit_s=budget.wall_s), cancel,
                           home)

    paths = {"python": python, "submission": str(request.submission_dir),
             "bundle": str(request.bundle_dir), "output": str(request.output_dir),
             "learner": str(request.learner_dir), "channel": str(request.channel_dir),
             "scratch": str(request.meta_test_output_dir)}
    return run_two_stages(request, cancel, run_stage, paths)


def run_command(command: list[str], request: ExecutionRequest, cancel: threading.Event,
                home: Path | None = None) -> ExecutionResult:
    """Run `command` in the submission folder under the request's wall-clock limit
    (`submission_api.runner.limited.run_limited`, as `arena run` does)."""
    with tempfile.TemporaryDirectory(prefix="arena-local-") as scratch:
        if home is None:
            home = Path(scratch) / "home"
            home.mkdir()
        # No memory limit is enforced here, but the host's OOM killer may still end the run:
        # only its count in our cgroup says so (`oom_killed`), never the signal alone.
        ran = run_limited(command, env=build_environment(request, home),
                          time_limit_s=request.time_limit_s,
                          log_cap_bytes=request.log_cap_bytes, cwd=request.submission_dir,
                          cancel=cancel, on_output=None if request.live_tail is None
                          else request.live_tail.append)
    return ExecutionResult(exit_code=ran.exit_code, oom_killed=ran.oom_killed,
                           timed_out=ran.timed_out, wall_time_s=ran.seconds, stdout=ran.stdout,
                           stderr=ran.stderr, stdout_truncated=ran.stdout_truncated,
                           stderr_truncated=ran.stderr_truncated)
