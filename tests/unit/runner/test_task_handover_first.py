"""The next test task's socket reaches the supervisor before its images are cut (issue 38.1):
where tasks have their own namespaces, the trusted side hands it over as soon as the current task
is released, and sends the images on it once the cutting thread has them. The hand-over (the
supervisor, the fork server, the task's reaper, its process: one wake-up each, each a scheduling
delay on a loaded host) so runs while the images are cut instead of after. A cut that fails
ahead is made again at the task's turn and sent on the same socket: the supervisor is never
asked twice for one task.

The supervisor here is the test itself, speaking the control protocol to a real `TaskServer`.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner import task_server
from submission_api.runner.bundle import read_task_plan
from submission_api.runner.channel import (
    ChannelError,
    receive_control,
    receive_message,
    receive_sealed,
    send_control,
    send_message,
    unix_address,
)
from submission_api.runner.prepare import prepare_run
from submission_api.runner.task_payloads import Payloads
from submission_api.runner.task_server import TaskServer

THREE_TASKS = ProtocolParams.from_dict({"name": "fixed", "n_ways": 2, "n_shots": 1,
                                         "n_queries": 2, "tasks_per_dataset": 2})
WAIT_S = 20.0
QUIET_S = 0.5
"""How long a message that must not come is waited for."""


def _socket_of(control: socket.socket, expected_id: int) -> socket.socket:
    message, fds = receive_control(control, time.monotonic() + WAIT_S, max_fds=1)
    assert (message.get("type"), message.get("id"), len(fds)) == ("task", expected_id, 1)
    return socket.socket(fileno=fds[0])


def _images_on(sock: socket.socket, expected_id: int) -> int:
    header, (_, _, query) = receive_sealed(sock, 1 << 26, time.monotonic() + WAIT_S)
    assert header["id"] == expected_id
    return len(query)


def _finish(control: socket.socket, task: socket.socket, task_id: int, n_query: int) -> None:
    """Answer the task as its process would, then end it as the supervisor would."""
    send_message(task, {"type": "predictions"}, [np.zeros(n_query, dtype=np.int64)])
    collect, _ = receive_control(control, time.monotonic() + WAIT_S)
    assert (collect.get("type"), collect.get("id")) == ("collect", task_id)
    send_control(control, {"type": "ended", "id": task_id, "exit_code": 0, "signal": None,
                           "killed_by_supervisor": False, "left": []})


@pytest.mark.parametrize("first_cut", ["slow", "fails"])
def test_the_next_task_is_handed_over_before_its_images_are_cut(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path,
        monkeypatch: pytest.MonkeyPatch, first_cut: str):
    collection = load_collection(tiny_collection, arena_cache)
    answers = tmp_path / "answers"
    prepare_run(collection, THREE_TASKS, (0, 0), tmp_path / "bundle", answers)
    n_tasks = len(read_task_plan(answers).tasks)
    assert n_tasks >= 2
    cut, calls, proceed = Payloads._cut, [], threading.Event()

    def held(self: Payloads, task: task_server.AnswerTask):  # noqa: ANN202
        calls.append(task.id)
        if task.id == 1 and calls.count(1) == 1:  # task 1's cut ahead, while task 0 runs
            if not proceed.wait(WAIT_S):
                raise TimeoutError("the test never let the cut go on")
            if first_cut == "fails":
                raise OSError(5, "Input/output error", "images.u8")
        return cut(self, task)

    monkeypatch.setattr(Payloads, "_cut", held)
    with TaskServer(answers, tmp_path / "channel", time.monotonic() + 120) as server:
        control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with unix_address(server.socket_path) as address:
            control.connect(address)
        send_control(control, {"type": "hello", "pid": 1, "private": True, "isolation": "test"})
        first = _socket_of(control, 0)
        n_query = _images_on(first, 0)
        go, _ = receive_message(first, 0, time.monotonic() + WAIT_S)
        assert go["type"] == "go"
        try:
            # task 1's cut is held, yet its socket comes: its process is started meanwhile
            second = _socket_of(control, 1)
            assert not select.select([second], [], [], QUIET_S)[0], "images before the cut"
        finally:
            proceed.set()
        if first_cut == "slow":
            assert _images_on(second, 1) == n_query
        _finish(control, first, 0, n_query)
        first.close()
        if first_cut == "fails":  # cut again at its turn, sent on the socket it already has
            assert _images_on(second, 1) == n_query
        for task_id in range(1, n_tasks):
            go, _ = receive_message(second, 0, time.monotonic() + WAIT_S)
            assert go["type"] == "go"
            following = _socket_of(control, task_id + 1) if task_id + 1 < n_tasks else None
            _finish(control, second, task_id, n_query)
            second.close()
            if following is not None:
                assert _images_on(following, task_id + 1) == n_query
                second = following
        end, _ = receive_control(control, time.monotonic() + WAIT_S)
        assert end["type"] == "end"
        with pytest.raises(ChannelError):  # nothing else: no task was asked for twice
            receive_control(control, time.monotonic() + QUIET_S, max_fds=1)
        control.close()
    assert server.report.ok and server.report.tasks_done == n_tasks, server.report
    assert calls.count(1) == (2 if first_cut == "fails" else 1)
