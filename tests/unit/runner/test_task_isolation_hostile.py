"""Hostile participant code against the meta-test machinery itself (issue 19): frames that once
killed the trusted task-server thread end the run at once as `bad_predictions` naming the task;
the sweep removes what a task locked (mode 000 and 100 folders, its folder's own xattrs, IPC it
handed to another owner) and says what it could not remove; what a task changes on the processes
it is forked from and reports to is put back, or named."""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import tempfile
from pathlib import Path

import pytest

from submission_api.protocols import ProtocolParams
from submission_api.runner import inherited, sweep
from submission_api.runner.local import run_local

ONE_TASK = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 1})
NOBODY = 65534

HOSTILE_MODEL = """
import os, socket, time
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

FRAME = {frame!r}


def task_socket():
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        if sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM:
            return sock
        sock.detach()
    raise RuntimeError("no task socket")


class MyPredictor(Predictor):
    def predict(self, query_set):
        task_socket().sendall(len(FRAME).to_bytes(4, "big") + FRAME)
        time.sleep(100000)  # the verdict must not wait for this process


class MyLearner(Learner):
    def fit(self, support_set):
        return MyPredictor()
    def save(self, path):
        pass
    def load(self, path):
        pass


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
"""

FRAMES = {
    "a dimension of 10**400": b'{"type": "predictions", "arrays": [{"dtype": "<i8", "shape": ['
                              + str(10**400).encode() + b"]}]}",
    "JSON nested 30,000 deep": b"[" * 30000 + b"]" * 30000,
    "a shape [0, 10**30]": b'{"type": "predictions", "arrays": [{"dtype": "<i8", "shape": [0, '
                           + str(10**30).encode() + b"]}]}",
}


@pytest.mark.parametrize("frame", list(FRAMES), ids=list(FRAMES))
def test_a_hostile_frame_ends_the_run_at_once_as_bad_predictions_naming_the_task(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path, frame: str):
    submission = tmp_path / "sub"
    submission.mkdir()
    (submission / "model.py").write_text(HOSTILE_MODEL.format(frame=FRAMES[frame]))

    # The task sleeps far past the time limit: only a verdict reached at once is not timed_out.
    result = run_local(submission, tiny_collection, tmp_path / "out", protocol=ONE_TASK,
                       cache_dir=arena_cache, time_limit_s=240)

    assert (result.state, result.reason) == ("failed", "bad_predictions"), result.message
    assert "test task 0" in result.message


def as_nobody(tmp: Path, work) -> list[str]:  # noqa: ANN001 - a callable run in the child
    """Run `work(folder)` in a forked child as uid 65534 (root's DAC override would hide
    what a mode-000 folder does to an unprivileged sweep); return what it returned."""
    if os.getuid() != 0:
        return work(tmp)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write, "\n".join(work(tmp)).encode() or b"-")
        except BaseException as error:  # noqa: BLE001 - report it to the parent
            os.write(write, f"raised {type(error).__name__}: {error}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        text = handle.read()
    os.waitpid(pid, 0)
    return [] if text == "-" else text.split("\n")


@pytest.fixture
def open_tmp():
    folder = Path(tempfile.mkdtemp(prefix="arena-sweep-", dir="/tmp"))
    os.chmod(folder, 0o777)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o700)
    shutil.rmtree(folder)


def test_an_unprivileged_sweep_removes_folders_of_mode_000_and_100(open_tmp: Path):
    def work(tmp: Path) -> list[str]:
        scratch = tmp / "scratch"
        for name, mode in (("closed", 0o000), ("exec-only", 0o100)):
            (scratch / name / "deeper").mkdir(parents=True)
            (scratch / name / "deeper" / "memory").write_text("task 1 was here")
            (scratch / name).chmod(mode)
        os.chdir(scratch)
        for _ in range(3000):  # deeper than any recursive walk goes, past PATH_MAX
            os.mkdir("d")
            os.chdir("d")
        os.chdir(tmp)
        left = sweep.empty_folder(scratch)
        return left + [f"still there: {p.name}" for p in scratch.iterdir()]

    assert as_nobody(open_tmp, work) == []


def test_the_sweep_removes_the_folders_own_xattrs_and_names_what_it_cannot_remove(
        open_tmp: Path):
    def work(tmp: Path) -> list[str]:
        scratch = tmp / "scratch"
        scratch.mkdir()
        try:
            os.setxattr(scratch, "user.memory", b"nonce")
        except OSError:
            return ["skip: no user xattrs here"]
        left = sweep.empty_folder(scratch)
        return left + [f"xattr {n}" for n in os.listxattr(scratch)]

    left = as_nobody(open_tmp, work)
    if left == ["skip: no user xattrs here"]:
        pytest.skip("this filesystem keeps no user xattrs")
    assert left == []


def test_a_folder_the_sweep_cannot_empty_is_named_not_counted_removed(open_tmp: Path):
    (open_tmp / "scratch").mkdir()
    (open_tmp / "scratch" / "roots").write_text("owned by root in a folder nobody may write")
    os.chmod(open_tmp / "scratch", 0o755)
    if os.getuid() != 0:
        pytest.skip("needs root to make a file the unprivileged sweep cannot remove")
    left = as_nobody(open_tmp, lambda tmp: sweep.empty_folder(tmp / "scratch"))
    assert any("roots" in item for item in left), left


def test_ipc_handed_to_another_owner_is_still_removed(open_tmp: Path):
    def work(tmp: Path) -> list[str]:
        libc = ctypes.CDLL(None, use_errno=True)
        before = sweep.snapshot_ipc()
        ident = libc.shmget(0, 4096, 0o1000 | 0o600)

        class Perm(ctypes.Structure):  # struct ipc64_perm's leading fields (x86-64, arm64)
            _fields_ = [("key", ctypes.c_int), ("uid", ctypes.c_uint), ("gid", ctypes.c_uint),
                        ("cuid", ctypes.c_uint), ("cgid", ctypes.c_uint),
                        ("mode", ctypes.c_uint)]

        buffer = (ctypes.c_char * 256)()
        assert libc.shmctl(ident, 2, buffer) == 0  # IPC_STAT
        perm = Perm.from_buffer(buffer)
        perm.uid = 0  # handed to root: an owner-based sweep would leave it
        assert libc.shmctl(ident, 1, buffer) == 0, ctypes.get_errno()  # IPC_SET
        owners = [o for t, i, o, _ in sweep.sysv_objects() if i == ident]
        left = sweep.remove_new_ipc(before)
        still = [i for _, i, _, _ in sweep.sysv_objects() if i == ident]
        return left + [f"segment {ident} owned by {owners} still there" for _ in still]

    if not Path("/proc/sysvipc/shm").exists():
        pytest.skip("no System V IPC here")
    assert as_nobody(open_tmp, work) == []


def test_a_lowered_hard_limit_of_the_supervisor_is_named(open_tmp: Path):
    def work(tmp: Path) -> list[str]:
        baseline = inherited.read_attributes(os.getpid())
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft // 2, hard // 2))
        left = inherited.restore_attributes(os.getpid(), baseline, "the supervisor")
        return left if left else ["nothing was named"]

    left = as_nobody(open_tmp, work)
    assert any("RLIMIT_NOFILE of the supervisor" in item for item in left), left


def test_a_changed_soft_limit_and_affinity_are_put_back(open_tmp: Path):
    def work(tmp: Path) -> list[str]:
        baseline = inherited.read_attributes(os.getpid())
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft // 2, hard))
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, cpus[:1])
        left = inherited.restore_attributes(os.getpid(), baseline, "the supervisor")
        if inherited.read_attributes(os.getpid()) != baseline:
            left.append("not restored")
        return left

    assert as_nobody(open_tmp, work) == []


STOPPER_MODEL = """
import os, signal
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor


class MyPredictor(Predictor):
    def predict(self, query_set):
        # Outer pids, as /proc shows them (in its own PID namespace getppid() is 0): the
        # parent reaps this task and ends with it; above it the fork server, the supervisor.
        def parent(pid):
            return int(open(f"/proc/{pid}/status").read().split("PPid:")[1].split()[0])

        supervisor = parent(parent(parent("self")))
        for task in os.listdir(f"/proc/{supervisor}/task"):
            for child in open(f"/proc/{supervisor}/task/{task}/children").read().split():
                os.kill(int(child), signal.SIGSTOP)  # the fork server: the next task waits on it
        return np.zeros(len(query_set), dtype=np.int64)


class MyLearner(Learner):
    def fit(self, support_set):
        return MyPredictor()
    def save(self, path):
        pass
    def load(self, path):
        pass


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
"""


def test_stopping_the_fork_server_is_refused_or_fails_the_run_with_what_was_left(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    submission = tmp_path / "sub"
    submission.mkdir()
    (submission / "model.py").write_text(STOPPER_MODEL)

    result = run_local(submission, tiny_collection, tmp_path / "out", protocol=ONE_TASK,
                       cache_dir=arena_cache, time_limit_s=240)

    # In its own PID namespace the task cannot name the fork server (No such process, or
    # Landlock (ABI >= 6), which scopes signals to the task: Operation not permitted). Without
    # either the supervisor finds the fork server stopped, and the run is the participant's.
    assert result.state == "failed", result.message
    if result.reason == "predict_error":
        assert "No such process" in result.message or \
            "Operation not permitted" in result.message, result.message
    else:
        assert result.reason == "crashed", result.message
        assert "test task 0 left behind" in result.message
        assert "the fork server was stopped by a task" in result.message
