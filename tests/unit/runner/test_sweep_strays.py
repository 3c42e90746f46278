"""The sweep's process check against a fork server that forks while the sweep runs (issue 38).

In the sandbox, the supervisor's sweep after each task lists every process of the run's uid and
kills, then reports as left behind by the task, any that is neither its own nor beneath the
fork server (whose children are the next tasks' standbys, made while the current task runs).
The fork server forks the next standby at any moment, the sweep included: once the hostile-case
batch failed with "test task 1 left behind ... process 18". These tests make the fork happen
exactly between the sweep's steps, in processes of a uid of their own (root only: no other
process of the host can be listed, let alone killed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from submission_api.runner import sweep

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run processes under "
                                                          "a uid of their own")

FORK_SERVER = """
while read -r line; do
    sh -c 'sleep 120 & exec sleep 120' &  # T (exec'd into a sleep) and its P
    echo $!
done
"""
"""A stand-in for the fork server: on each line, a standby T with its P."""


def _free_uid() -> int:
    """A uid no process of this host runs as."""
    taken = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                taken.add(os.stat(entry.path).st_uid)
            except OSError:
                continue
    return next(uid for uid in range(61_000, 62_000) if uid not in taken)


@pytest.fixture
def uid() -> Iterator[int]:
    uid = _free_uid()
    yield uid
    for pid in sweep.processes_of_uid(uid, ()):  # whatever a failed test left of ours
        os.kill(pid, signal.SIGKILL)


def _start(uid: int, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(list(argv), user=uid, group=uid, extra_groups=[],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _fork_standby(server: subprocess.Popen[str]) -> int:
    """T's pid, once its P exists."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("fork\n")
    server.stdin.flush()
    t = int(server.stdout.readline())
    deadline = time.monotonic() + 10
    while not sweep._children_of(t) and time.monotonic() < deadline:
        time.sleep(0.001)
    return t


def test_a_standby_forked_during_the_sweep_is_not_a_stray(uid: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    server = _start(uid, "sh", "-c", FORK_SERVER)
    stray = _start(uid, "sleep", "120")
    try:
        before = _fork_standby(server)  # the next task's standby, made while the task ran
        listed = sweep.processes_of_uid

        def fork_then_list(*args: object, **kwargs: object) -> list[int]:
            # the fork server makes the following standby now, as the sweep starts its listing
            forked.append(_fork_standby(server))
            return listed(*args, **kwargs)  # type: ignore[arg-type]

        forked: list[int] = []
        monkeypatch.setattr(sweep, "processes_of_uid", fork_then_list)
        found = sweep.stray_processes(uid, {server.pid}, below=server.pid)
        assert forked, "the listing did not run"
        standbys = {before, forked[0], *sweep._children_of(before), *sweep._children_of(forked[0])}
        assert len(standbys) == 4
        assert found == [stray.pid], (
            f"the sweep took standbys {sorted(standbys & set(found))} for strays")
        # where tasks share namespaces nothing beneath the fork server is trusted
        monkeypatch.setattr(sweep, "processes_of_uid", listed)
        assert set(sweep.stray_processes(uid, {server.pid})) == {stray.pid, *standbys}
    finally:
        for process in (server, stray):
            process.kill()
            process.wait()


def test_a_process_reparented_away_from_the_fork_server_is_a_stray(uid: int) -> None:
    """A standby whose T died is the supervisor's (the subreaper's) or init's: no longer
    beneath the fork server, it is swept like any other process of the run's uid."""
    server = _start(uid, "sh", "-c", FORK_SERVER)
    try:
        t = _fork_standby(server)
        (p,) = sweep._children_of(t)
        os.kill(t, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while sweep.is_below(p, t) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not sweep.is_below(p, server.pid)
        assert sweep.stray_processes(uid, {server.pid}, below=server.pid) == [p]
    finally:
        server.kill()
        server.wait()


LEADER_EXITS = """
import ctypes, threading, time
threading.Thread(target=time.sleep, args=(120,)).start()
print("ready", flush=True)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread only; the process shows as Z
"""


def _state(pid: int) -> bytes:
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]


def test_a_zombie_leader_with_a_running_thread_is_not_dead_but_an_unreaped_exit_is():
    """`kill_descendants` counts a dead child it cannot reap (a host tracer holds its exit) as
    gone; a process whose main thread exited while another runs looks like that zombie and
    must not pass for it."""
    hider = subprocess.Popen([sys.executable, "-c", LEADER_EXITS], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert hider.stdout is not None and hider.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 30
        while _state(hider.pid) != b"Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(hider.pid) == b"Z"
        assert not sweep._dead(hider.pid)
        os.kill(hider.pid, signal.SIGKILL)
        while not sweep._dead(hider.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sweep._dead(hider.pid)  # exited, not yet reaped by us (its parent)
        assert os.path.exists(f"/proc/{hider.pid}")
    finally:
        hider.kill()
        hider.wait()
