"""The next test task is started ahead (issue 38): where tasks have their own namespaces, the
trusted side hands the next task's socket and images to its process as soon as the current task
is released, so the process converts them while the current task runs; it releases that task
(`go`) only once the current one is reported gone and swept. In shared namespaces, where a
running task could reach the next one's process, nothing of the next task leaves the trusted
side before the current one has ended.

The supervisor here is the test itself, speaking the control protocol to a real `TaskServer`,
so the order of every message is observed exactly.
"""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
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
from submission_api.runner.task_server import TaskServer

FOUR_TASKS = ProtocolParams.from_dict({"name": "fixed", "n_ways": 2, "n_shots": 1,
                                        "n_queries": 2, "tasks_per_dataset": 2})
QUIET_S = 0.5
"""How long a message that must not come is waited for."""


def _task(control: socket.socket, expected_id: int) -> tuple[socket.socket, int]:
    """The next task's socket, as the supervisor gets it, and its images read off it (as its
    process reads them); returns the socket and the number of query images."""
    message, fds = receive_control(control, time.monotonic() + 20, max_fds=1)
    assert (message.get("type"), message.get("id"), len(fds)) == ("task", expected_id, 1)
    sock = socket.socket(fileno=fds[0])
    header, (_, _, query) = receive_sealed(sock, 1 << 26, time.monotonic() + 20)
    assert header["id"] == expected_id
    return sock, len(query)


def _nothing_on(sock: socket.socket) -> bool:
    return not select.select([sock], [], [], QUIET_S)[0]


def _finish(control: socket.socket, task: socket.socket, task_id: int, n_query: int) -> None:
    """Answer the task as its process would, then end it as the supervisor would."""
    send_message(task, {"type": "predictions"}, [np.zeros(n_query, dtype=np.int64)])
    collect, _ = receive_control(control, time.monotonic() + 20)
    assert (collect.get("type"), collect.get("id")) == ("collect", task_id)
    send_control(control, {"type": "ended", "id": task_id, "exit_code": 0, "signal": None,
                           "killed_by_supervisor": False, "left": []})


@pytest.mark.parametrize("private", [True, False], ids=["own-namespaces", "shared"])
def test_the_next_task_arrives_while_the_current_runs_and_is_released_only_after_it(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path, private: bool):
    collection = load_collection(tiny_collection, arena_cache)
    answers = tmp_path / "answers"
    prepare_run(collection, FOUR_TASKS, (0, 0), tmp_path / "bundle", answers)
    n_tasks = len(read_task_plan(answers).tasks)
    assert n_tasks >= 3
    with TaskServer(answers, tmp_path / "channel", time.monotonic() + 120) as server:
        control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with unix_address(server.socket_path) as address:
            control.connect(address)
        send_control(control, {"type": "hello", "pid": 1, "private": private,
                               "isolation": "test"})
        current, n_query = _task(control, 0)
        for task_id in range(n_tasks):
            go, _ = receive_message(current, 0, time.monotonic() + 20)
            assert go["type"] == "go"
            following = None
            if task_id + 1 < n_tasks:
                if private:  # started now, while this task is still running
                    following = _task(control, task_id + 1)
                    assert _nothing_on(following[0]), "released before the current task ended"
                else:  # nothing of it while this task runs
                    with pytest.raises(ChannelError):
                        receive_control(control, time.monotonic() + QUIET_S, max_fds=1)
            _finish(control, current, task_id, n_query)
            current.close()
            if task_id + 1 < n_tasks:
                current, n_query = following or _task(control, task_id + 1)
        end, _ = receive_control(control, time.monotonic() + 20)
        assert end["type"] == "end"
        control.close()
    assert server.report.ok and server.report.tasks_done == n_tasks
    assert len(list((answers / "predictions").iterdir())) == n_tasks
