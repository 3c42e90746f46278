"""A run's private copy left in /dev/shm by a SIGKILLed `arena run` goes with the next run's copy
(issue 34; runner/private_copy.py): between real processes, the copy of a holder killed by
SIGKILL is removed when the next copy is made, a live holder's copy is kept (two runs on one
host never remove each other's), and so are a copy being made, another uid's and a lookalike
name. With a real `arena run` (`run_local`), its supervisor SIGKILLed mid-task: the copy
outlives it (nothing of ours is left to remove it) and the next copy removes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from submission_api.protocols import ProtocolParams
from submission_api.runner import private_copy
from submission_api.runner.local import run_local

SPACE = Path("/dev/shm")
PREFIX = "arena-copy-"
"""`private_copy.PREFIX`, spelled out: the copy's name is what a user finds left in /dev/shm."""
HOLDER = """
import sys, time
from pathlib import Path
from submission_api.runner import private_copy
[copy] = private_copy.make([Path(sys.argv[1])], Path(sys.argv[2]))
print(copy.parent, flush=True)
time.sleep(600)
"""


@pytest.fixture
def space() -> Path:
    if not private_copy.is_tmpfs(SPACE):
        pytest.skip("no tmpfs at /dev/shm here")
    return SPACE


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "submission"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.py").write_text("x = 1\n")
    (folder / "sub" / "w.bin").write_bytes(os.urandom(1 << 16))
    return folder


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
    if started:
        private_copy.remove_stale(SPACE)  # the copies of the holders just killed


def _hold(holders: list[subprocess.Popen[str]], source: Path, space: Path) -> Path:
    """A process that makes its copy, as a supervisor does, and lives on; its copy's folder."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(source), str(space)],
                               stdout=subprocess.PIPE, text=True, cwd=Path.cwd())
    holders.append(process)
    assert process.stdout is not None
    folder = Path(process.stdout.readline().strip())
    assert folder.name.startswith(PREFIX) and folder.is_dir(), folder
    return folder


def test_a_killed_holders_copy_goes_with_the_next_copy_and_a_live_holders_stays(
        holders: list[subprocess.Popen[str]], source: Path, space: Path):
    killed, alive = _hold(holders, source, space), _hold(holders, source, space)
    holders[0].send_signal(signal.SIGKILL)
    holders[0].wait()
    assert killed.is_dir()  # nothing of the killed run removes it
    nxt = _hold(holders, source, space)  # the next run's start
    assert not killed.exists()
    assert alive.is_dir() and (alive / f"0-{source.name}" / "model.py").read_text() == "x = 1\n"
    assert nxt.is_dir()
    for process in holders[1:]:  # both still alive: neither removed the other's copy
        assert process.poll() is None
    holders[1].kill()
    holders[1].wait()
    assert alive in private_copy.remove_stale(space)
    assert nxt.is_dir()


def test_a_copy_being_made_another_uids_and_a_lookalike_are_kept(source: Path, space: Path):
    making = Path(space, f"{private_copy.PREFIX}test-making-{os.getpid()}")
    other = Path(space, f"{private_copy.PREFIX}test-other-{os.getpid()}")
    lookalike = Path(space, f"arena-copi-test-{os.getpid()}")
    try:
        making.mkdir()  # made, not locked nor marked yet: its lock is free
        lookalike.mkdir()
        (lookalike / private_copy.OWNED).touch()
        other.mkdir()
        (other / private_copy.OWNED).touch()  # stale: marked, nobody holds its lock
        owners = [other]
        if os.geteuid() == 0:
            os.chown(other, 65534, 65534)
        else:
            owners = []  # not root: no folder of another uid to make
        removed = private_copy.remove_stale(space)
        assert making.is_dir() and lookalike.is_dir()
        assert [f for f in owners if not f.exists()] == [], "another uid's copy was removed"
        if not owners:
            assert other in removed
    finally:
        for folder in (making, other, lookalike):
            private_copy.remove(folder)


SLOW_MODEL = '''
import time
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()


class MyLearner(Learner):
    def fit(self, support_set):
        return MyPredictor(support_set[3])

    def save(self, path_to_save):
        open(f"{path_to_save}/marker.txt", "w").write("x")

    def load(self, path_to_load):
        pass


class MyPredictor(Predictor):
    def __init__(self, n_ways):
        self.n_ways = n_ways

    def predict(self, query_set):
        time.sleep(30)
        return np.zeros(len(query_set), dtype=np.int64)
'''


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _supervisor_copy() -> tuple[int, Path] | None:
    """This run's supervisor (our child) once it holds its copy's lock, and the copy."""
    for child in _children(os.getpid()):
        try:
            if b"submission_api.runner.supervisor" not in \
                    Path(f"/proc/{child}/cmdline").read_bytes():
                continue
            for fd in os.listdir(f"/proc/{child}/fd"):
                target = os.readlink(f"/proc/{child}/fd/{fd}")
                if target.startswith(f"{SPACE}/{PREFIX}") and \
                        Path(target).parent == SPACE:
                    return child, Path(target)
        except OSError:
            continue
    return None


def test_an_arena_runs_copy_left_by_its_sigkilled_supervisor_goes_with_the_next_copy(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path, space: Path,
        holders: list[subprocess.Popen[str]], source: Path):
    submission = tmp_path / "run-submission"
    submission.mkdir()
    (submission / "model.py").write_text(SLOW_MODEL)
    found: list[Path] = []

    def host() -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if (seen := _supervisor_copy()) is not None:
                time.sleep(1.0)  # under way
                found.append(seen[1])
                os.kill(seen[0], signal.SIGKILL)
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=host, daemon=True)
    watcher.start()
    protocol = ProtocolParams.from_dict({"name": "fixed", "n_ways": 2, "n_shots": 1,
                                         "n_queries": 2, "tasks_per_dataset": 1})
    result = run_local(submission, tiny_collection, tmp_path / "out", protocol=protocol,
                       cache_dir=arena_cache, time_limit_s=240.0)
    watcher.join(timeout=5)
    assert found, f"the supervisor's copy was never seen: {result.state} {result.message}"
    [left] = found
    assert result.state == "failed", result.message
    assert left.is_dir(), "the killed run's copy is gone before the next run: nothing to test"
    deadline = time.monotonic() + 60  # its fork server and reapers end after it
    while left.exists() and time.monotonic() < deadline:
        _hold(holders, source, space)  # the next run's start
        time.sleep(0.5)
    assert not left.exists(), "the next run's copy left the killed run's copy in /dev/shm"
