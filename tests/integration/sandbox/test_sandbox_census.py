"""The channel census in the Docker sandbox (issue 19): the meta-test stage as the worker runs
it (`make_docker_executor`: both stages in sandboxes, the task server on this side), with the
probe of `tests/isolation_census.py` in every test task. No nonce may cross a task boundary,
every task must start with the same attributes, and the probe must have written (and read back)
the channels the sandbox offers: /tmp and /dev/shm (files, mode-000 folders, socket files, the
folders' own xattrs where the filesystem keeps them; /output must be read-only), a System V
segment handed to another owner, a daemon, the supervisor's, fork server's and init's rlimits
and affinity, its stdout's flags."""

from __future__ import annotations

import os
import sys
import threading
import uuid
from pathlib import Path

import pytest

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.prepare import prepare_run
from submission_api.runner.task_server import read_report
from worker.pipeline.execute import ExecutionRequest, make_docker_executor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from isolation_census import (  # noqa: E402 - path above
    crossings,
    moved_machine_counters,
    parse_census,
    residency_crossings,
    shared_with_init,
    write_census,
)

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
FOUR_TASKS = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 2})
SANDBOX_CHANNELS = ("frames", "heap", "System V segment", "abstract socket")


def run_in_sandbox(docker_client, tmp_path: Path, collection_dir: Path, cache: Path,
                   submission: Path, task_namespaces: bool = True):
    collection = load_collection(collection_dir, cache)
    work = tmp_path / "run"
    prepare_run(collection, FOUR_TASKS, (0, 0), work / "bundle", work / "answers")
    (work / "output").mkdir()
    request = ExecutionRequest(
        run_id="census", image=IMAGE, submission_dir=submission,
        bundle_dir=work / "bundle", output_dir=work / "output", time_limit_s=600, cpus=1,
        memory_mb=2048, log_cap_bytes=4 << 20, answers_dir=work / "answers",
        name=f"arena-census-{uuid.uuid4().hex[:8]}")
    executor = make_docker_executor(docker_client, task_namespaces=task_namespaces)
    result = executor(request, threading.Event())
    return result, read_report(work / "answers")


def test_no_nonce_crosses_a_task_boundary_in_the_sandbox(
        docker_client, tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    result, report = run_in_sandbox(docker_client, tmp_path, tiny_collection, arena_cache,
                                    write_census(tmp_path / "census"))

    assert report is not None and report.ok, (report, result.stderr[-3000:])
    reports = parse_census(result.stderr)
    assert len(reports) == 4, result.stderr[-3000:]
    wrote = set(reports[0]["wrote"])
    assert set(SANDBOX_CHANNELS) <= wrote, wrote
    for place in ("/tmp", "/dev/shm"):
        assert f"locked folder {place}/.census-locked-" in " ".join(wrote), (place, wrote)
    # The meta-test /output is mounted read-only: no file and no xattr on its root.
    assert not [c for c in wrote if "/output" in c], wrote
    assert any(c.startswith("process") for c in wrote), wrote
    assert crossings(reports) == []
    # By construction, not by the sweep: every task ran as the first process of namespaces of
    # its own (user, mount, IPC, network, PID, entered in one unshare), on a fresh tmpfs
    # mounted over /tmp and /dev/shm, so what it left there, in its IPC or abstract sockets, or
    # as processes, died with it.
    assert report.isolation.startswith("own user, mount, IPC, network and PID"), report.isolation
    assert shared_with_init(reports) == []
    # The machine's counters in /proc (CPU time, forks, page faults since boot), which every
    # task moves, read as they were before the first task.
    assert moved_machine_counters(reports) == []
    # The submission and the learner (a 4 MiB file in each) are read from the run's private
    # tmpfs copy: the only mount at each in the task's own root (runner/task_root.py).
    assert all(r["world"]["root_kind"] == "tmpfs" for r in reports), reports[0]["world"]
    assert all(r["world"]["copies"] == {"/submission": 1, "/learner": 1} and
               r["world"]["copy_kinds"] == {"/submission": "tmpfs", "/learner": "tmpfs"}
               for r in reports), [r["world"] for r in reports]
    assert "submission and learner read from a private tmpfs copy" in report.isolation
    # Issue 34: every probed page of the shipped file, the learner file and an image file no
    # one maps reads resident in every task (the copy is a tmpfs; the worker pre-faulted the
    # image), so the nonces the tasks wrote by touching pages carry nothing.
    assert residency_crossings(reports, ("shipped", "learner", "image")) == []


def test_under_dockers_default_profile_tasks_share_namespaces_and_the_sweep_holds(
        docker_client, tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    """The fallback of a host that refuses the tasks' namespaces (Docker's default seccomp
    profile here; an AppArmor profile that denies mount elsewhere): the run says so, and the
    sweep still keeps every nonce from crossing."""
    result, report = run_in_sandbox(docker_client, tmp_path, tiny_collection, arena_cache,
                                    write_census(tmp_path / "census"), task_namespaces=False)

    assert report is not None and report.ok, (report, result.stderr[-3000:])
    assert report.isolation.startswith("shared namespaces"), report.isolation
    reports = parse_census(result.stderr)
    assert len(reports) == 4, result.stderr[-3000:]
    assert crossings(reports) == []
    assert shared_with_init(reports), "the tasks were expected to share init's namespaces"
    # What remains on this path (docs/internals.md): the live counters, which the census moves.
    assert moved_machine_counters(reports), "the shared /proc was expected to show them move"


LOWERING_MODEL = """
import os, resource
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor


def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


class MyPredictor(Predictor):
    def predict(self, query_set):
        # the parent reaps this task and ends with it; above it the fork server, the supervisor
        supervisor = parent(parent(os.getppid()))
        soft, hard = resource.prlimit(supervisor, resource.RLIMIT_NOFILE)
        resource.prlimit(supervisor, resource.RLIMIT_NOFILE, (soft // 2, hard // 2))
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


def test_a_change_the_supervisor_cannot_undo_fails_the_run_naming_it(
        docker_client, tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    submission = tmp_path / "lowering"
    submission.mkdir()
    (submission / "model.py").write_text(LOWERING_MODEL)

    # Shared namespaces: the task can name its parent (in its own PID namespace it cannot).
    _, report = run_in_sandbox(docker_client, tmp_path, tiny_collection, arena_cache, submission,
                               task_namespaces=False)

    assert report is not None and (report.reason, report.failed_task) == ("crashed", 0), report
    assert "test task 0 left behind" in report.message
    assert "RLIMIT_NOFILE of the supervisor" in report.message


SECCOMP_PROBE = """
import os
from submission_api.runner import seccomp
print("installed", seccomp.deny_page_cache_control())
try:
    os.preadv(os.open("/submission/main.py", os.O_RDONLY), [bytearray(8)], 0, os.RWF_NOWAIT)
    print("nowait read allowed")
except OSError as error:
    print("nowait read refused", error.errno)
"""


def test_the_task_seccomp_filter_installs_in_the_sandbox(run_script):
    result = run_script(SECCOMP_PROBE, wall_time_s=120.0, memory_mb=512)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["installed", "True", "nowait", "read", "refused", "95"]
