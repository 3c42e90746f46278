"""The run's private copy of the submission and the learner (issue 34.2): every byte written (no
hole left for a task to fill), read-only, links kept, other kinds left out; a copy that does not
fit in the run's memory ends the run as the participant's `out_of_memory`, with a message."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner import private_copy
from submission_api.runner.channel import send_control, unix_address
from submission_api.runner.prepare import prepare_run
from submission_api.runner.task_server import TaskServer


def test_the_copy_writes_every_page_and_is_read_only(tmp_path: Path):
    source = tmp_path / "learner"
    (source / "sub").mkdir(parents=True)
    with (source / "sparse.bin").open("wb") as handle:
        handle.truncate(8 << 20)  # a hole of 8 MiB: the copy must allocate every page
    (source / "sub" / "w.txt").write_text("w")
    (source / "link").symlink_to("sub/w.txt")
    os.mkfifo(source / "fifo")
    space = Path("/dev/shm")
    if not private_copy.is_tmpfs(space):
        pytest.skip("no tmpfs at /dev/shm here")
    [copy] = private_copy.make([source], space)
    try:
        info = os.stat(copy / "sparse.bin")
        assert info.st_blocks * 512 >= 8 << 20  # allocated, not a hole
        assert (copy / "link").is_symlink() and (copy / "link").read_text() == "w"
        assert not (copy / "fifo").exists()
        assert not os.stat(copy / "sub" / "w.txt").st_mode & 0o222
        assert private_copy.is_tmpfs(copy)
        before = private_copy.fingerprint([copy])
        assert private_copy.changed(before, [copy]) == []
        os.chmod(copy / "sub" / "w.txt", 0o644)
        assert private_copy.changed(before, [copy])  # a task in shared namespaces did this
    finally:
        private_copy.remove(copy.parent)
    assert not copy.parent.exists()


def test_a_copy_too_large_for_the_run_ends_it_as_out_of_memory(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    work = tmp_path / "run"
    prepare_run(load_collection(tiny_collection, arena_cache),
                ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 1}),
                (0, 0), work / "bundle", work / "answers")
    refusal = "the submission and the learner do not fit in the run's memory; make them smaller"
    with TaskServer(work / "answers", work / "channel", time.monotonic() + 60) as server:
        supervisor = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with unix_address(server.socket_path) as address:
            supervisor.connect(address)
        send_control(supervisor, {"type": "hello", "pid": os.getpid(), "refused": refusal})
        server._thread.join(30)
        supervisor.close()
    report = server.report
    assert (report.reason, report.failed_task, report.tasks_done) == ("out_of_memory", None, 0)
    assert report.message == refusal
