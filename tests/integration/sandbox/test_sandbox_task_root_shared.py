"""The worker's shared read-only copy for the per-task root (issue 38, `worker/task_root_cache.py`,
`runner/task_root_shared.py`), in the Docker sandbox as the worker runs the meta-test stage:

- a run uses it (its isolation line says so) and no test task can change it: writing, making a
  folder, chmod, remounting its root read-write (`mount` MS_REMOUNT and `mount_setattr`), through
  /proc/self/root too; the copy on the worker is the same afterwards;
- a copy whose marker names other folders than the run would copy is not used: the run copies
  for itself and its isolation line says why.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from pathlib import Path

import pytest

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.prepare import prepare_run
from submission_api.runner.task_root_shared import MARKER
from submission_api.runner.task_server import read_report
from worker import task_root_cache
from worker.pipeline.execute import ExecutionRequest, make_docker_executor

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
TWO_TASKS = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 1})
MODEL = r'''
import ctypes, json, os, sys
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

MS_REMOUNT, MS_BIND, MS_RDONLY = 0x20, 0x1000, 0x1


class MountAttr(ctypes.Structure):
    _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns", ctypes.c_uint64)]


def attempt(step):
    try:
        return "done: " + repr(step())
    except BaseException as error:
        return f"refused: {type(error).__name__}: {error}"


def syscall_ok(result):
    if result != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def write(path):
    with open(path, "a") as handle:
        handle.write("arena")


LIBC = ctypes.CDLL(None, use_errno=True)
ATTEMPTS = {
    "write a new file in the standard library": lambda: write("/usr/lib/python3.11/arena-x.py"),
    "append to a copied file": lambda: write("/etc/passwd"),
    "make a folder at the root": lambda: os.mkdir("/arena-x"),
    "chmod a copied file": lambda: os.chmod("/etc/passwd", 0o777),
    "remove a copied file": lambda: os.unlink("/etc/passwd"),
    "write through /proc/self/root": lambda: write("/proc/self/root/etc/arena-x"),
    "remount the root read-write": lambda: syscall_ok(LIBC.mount(
        None, b"/", None, MS_REMOUNT | MS_BIND, None)),
    "clear the root's read-only flag": lambda: syscall_ok(LIBC.syscall(
        442, -100, b"/", 0, ctypes.byref(MountAttr(0, MS_RDONLY, 0, 0)),
        ctypes.sizeof(MountAttr))),
    "write after those": lambda: write("/etc/arena-after"),
}


class MyPredictor(Predictor):
    def predict(self, query_set):
        return np.zeros(len(query_set), dtype=np.int64)


class MyLearner(Learner):
    def fit(self, support_set):
        done = {what: attempt(step) for what, step in ATTEMPTS.items()}
        sys.stderr.write("SHARED " + json.dumps(done) + "\n")
        return MyPredictor()

    def save(self, path):
        pass

    def load(self, path):
        pass


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def run(docker_client, tmp_path: Path, collection_dir: Path, cache: Path):  # noqa: ANN001, ANN201
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "model.py").write_text(MODEL)
    work = tmp_path / "run"
    prepare_run(load_collection(collection_dir, cache), TWO_TASKS, (0, 0), work / "bundle",
                work / "answers")
    (work / "output").mkdir()
    request = ExecutionRequest(
        run_id="task-root-shared", image=IMAGE, submission_dir=submission,
        bundle_dir=work / "bundle", output_dir=work / "output", time_limit_s=600, cpus=1,
        memory_mb=2048, log_cap_bytes=4 << 20, answers_dir=work / "answers",
        name=f"arena-shared-{uuid.uuid4().hex[:8]}")
    result = make_docker_executor(docker_client)(request, threading.Event())
    report = read_report(work / "answers")
    assert report is not None and report.ok, (report, result.stderr[-3000:])
    return result, report


def fingerprint(folder: Path) -> str:
    """Every name, mode, owner and content of the copy on the worker."""
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(folder)):
        for name in sorted([*dirs, *files]):
            path = Path(root, name)
            info = path.lstat()
            digest.update(f"{path}:{info.st_mode}:{info.st_uid}:{info.st_size}".encode())
            if path.is_file() and not path.is_symlink():
                digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.skipif(os.geteuid() != 0, reason="the worker makes the shared copy as root")
def test_a_run_uses_the_shared_copy_and_no_task_can_change_it(
        docker_client, tmp_path: Path, tiny_collection: Path, arena_cache: Path):  # noqa: ANN001
    places = ("/tmp", "/submission", "/learner")
    host = task_root_cache.for_image(docker_client, IMAGE, places)
    assert host is not None and (host / MARKER).is_file()
    before = fingerprint(host)

    result, report = run(docker_client, tmp_path, tiny_collection, arena_cache)

    assert "a per-task root on the worker's shared read-only tmpfs copy" in report.isolation, \
        report.isolation
    tries = [json.loads(line.split(" ", 1)[1]) for line in result.stderr.splitlines()
             if line.startswith("SHARED ")]
    assert len(tries) == 2, result.stderr[-3000:]
    print(f"what a task tried on the shared copy: {tries[0]}")
    for task in tries:
        assert all(outcome.startswith("refused") for outcome in task.values()), task
    assert fingerprint(host) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="the worker makes the shared copy as root")
def test_a_copy_made_for_other_folders_is_not_used(
        docker_client, tmp_path: Path, tiny_collection: Path, arena_cache: Path,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    places = ("/tmp", "/submission", "/learner")
    real = task_root_cache.for_image(docker_client, IMAGE, places)
    assert real is not None
    stale = tmp_path / "stale"  # its marker is all the run reads before it refuses it
    stale.mkdir()
    marker = json.loads((real / MARKER).read_text())
    marker["trees"] = marker["trees"][:-1]  # made when the image had one folder less
    (stale / MARKER).write_text(json.dumps(marker))
    monkeypatch.setattr(task_root_cache, "for_image", lambda *args, **kwargs: stale)

    _result, report = run(docker_client, tmp_path, tiny_collection, arena_cache)

    assert ("a per-task root on the run's tmpfs copy (the worker's shared copy not used: made "
            "for other folders than this run's)") in report.isolation, report.isolation
