"""A test task's stdout and stderr are pipes of its own (issue 34.5): a task that opens
/proc/self/fd/1 for reading reads its own output only, never the run's pipe that every task,
the supervisor and the fork server write to; what it writes still reaches the run's log,
relayed by its reaper."""

from __future__ import annotations

import re
from pathlib import Path

from submission_api.protocols import ProtocolParams
from submission_api.runner.local import run_local

FOUR_TASKS = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 2})
MODEL = r'''
import os, sys
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor


class MyPredictor(Predictor):
    def __init__(self, n_ways):
        self.n_ways = n_ways

    def predict(self, query_set):
        return np.zeros(len(query_set), dtype=np.int64)


class MyLearner(Learner):
    def fit(self, support_set):
        pipes = []
        for fd in (1, 2):
            info = os.fstat(fd)
            pipes.append(f"{info.st_dev}:{info.st_ino}")
        try:  # a descriptor of one's own opens again through /proc, read-only too
            reader = os.open("/proc/self/fd/1", os.O_RDONLY | os.O_NONBLOCK)
            try:
                seen = os.read(reader, 1 << 16)
            except BlockingIOError:
                seen = b""
            os.close(reader)
        except OSError:
            seen = b""
        sys.stderr.write(f"STDIO {pipes[0]} {pipes[1]} read {len(seen)}\n")
        print("RELAYED " + "x" * 100_000, flush=True)  # more than a pipe holds at once
        return MyPredictor(support_set[3])

    def save(self, path):
        pass

    def load(self, path):
        pass


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def test_each_task_writes_to_pipes_of_its_own_and_its_output_is_relayed(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "model.py").write_text(MODEL)
    result = run_local(submission, tiny_collection, tmp_path / "out", protocol=FOUR_TASKS,
                       cache_dir=arena_cache, time_limit_s=600)

    assert result.state == "finished", result.message
    reports = re.findall(r"STDIO (\S+) (\S+) read (\d+)",
                         (tmp_path / "out" / "stderr.txt").read_text())
    assert len(reports) == 4, reports
    # A pipe per task: no two tasks (and so no task and the supervisor) share one.
    assert len({stdout for stdout, _, _ in reports}) == 4, reports
    assert len({stderr for _, stderr, _ in reports}) == 4, reports
    assert all(read == "0" for _, _, read in reports), reports  # nothing there but its own
    stdout = (tmp_path / "out" / "stdout.txt").read_text()
    assert stdout.count("RELAYED " + "x" * 100_000) == 4
