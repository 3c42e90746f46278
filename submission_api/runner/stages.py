"""The two stages of a run's participant side, as every launcher runs them (`arena run`, the
worker's Docker sandbox and its unsandboxed local mode): one path, so local and platform scores
stay equal.

1. meta-train: `submission_api.runner.participant` in its own process (or container) with the
   bundle and a writable output folder; it leaves the learner in `output/learner`.
2. meta-test: `submission_api.runner.supervisor` in a fresh process (or container) that sees the
   submission and the learner (read-only where the launcher can make it so) and nothing of the
   test tasks; a `TaskServer` thread on the launcher's side releases them one at a time.

A launcher builds the commands with the paths as its participant side sees them and passes a
callable that starts the meta-test side once the task server listens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from submission_api.runner.task_server import MetaTestReport, TaskServer
from submission_api.sampling.seeds import compute_seed_words

META_TRAIN_MODULE = "submission_api.runner.participant"
META_TEST_MODULE = "submission_api.runner.supervisor"
SERVER_GRACE_S = 5.0
"""The task server outlives the launcher's own wall clock by this much, so the launcher's kill
(and its `timed_out`) always comes first."""

Result = TypeVar("Result")


def meta_train_command(python: str, submission: str, bundle: str, output: str) -> list[str]:
    return [python, "-m", META_TRAIN_MODULE, "--submission", submission, "--bundle", bundle,
            "--output", output]


def meta_test_command(python: str, control: str, submission: str, learner: str,
                      scratch: Sequence[str], seed: int, threads: int,
                      sandboxed: bool = False, private_copy: str | None = None) -> list[str]:
    """`sandboxed`: the meta-test side runs in a container of its own, whose IPC objects and
    /dev/shm the supervisor may sweep entirely between tasks. `private_copy`: the tmpfs folder
    for the run's copy of the submission and the learner (`runner/private_copy.py`)."""
    command = [python, "-m", META_TEST_MODULE, "--control", control, "--submission", submission,
               "--learner", learner, "--seed", str(seed), "--threads", str(threads)]
    if sandboxed:
        command.append("--sandboxed")
    if private_copy:
        command += ["--private-copy", private_copy]
    for folder in scratch:
        command += ["--scratch", folder]
    return command


def read_run_info(bundle_dir: Path) -> dict:
    return json.loads((bundle_dir / "run.json").read_text())


def compute_task_seed(info: dict) -> int:
    """The seed test-task processes derive theirs from: participant-side only (run.json)."""
    return compute_seed_words(int(info["participant_seed"]), 1)[0]


def run_meta_test(answers_dir: Path, channel_dir: Path, time_limit_s: float,
                  launch: Callable[[Path], Result],
                  progress_path: Path | None = None) -> tuple[Result, MetaTestReport]:
    """Serve the prepared tasks while `launch(control_socket_path)` runs the meta-test side.

    Returns the launcher's result and the trusted side's report (also written to
    `answers_dir/meta_test.json`; predictions in `answers_dir/predictions/`).
    """
    deadline = time.monotonic() + time_limit_s + SERVER_GRACE_S
    server = TaskServer(answers_dir, channel_dir, deadline, progress_path)
    with server:
        result = launch(server.socket_path)
    return result, server.report
