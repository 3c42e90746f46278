"""The fork server: the clean process every test task's process is forked from.

It imports torch and our modules once (so a task starts as a cheap fork) and then only forks:
it never runs participant code, never sweeps, never waits for a task or reads anything a task
produced. So nothing of task i is in its memory when task i+1 is forked from it: not the exit
status, not the names of the files the sweep found (the supervisor, which does that
bookkeeping, is a separate process that tasks are never forked from).

Each fork is a double fork: the fork server's child T enters the task's own namespaces and
fresh tmpfs mounts where the supervisor found them possible (`runner/namespaces.py`), forks the
task's process P (the first process of the new PID namespace), reports P's pid to the
supervisor and exits at once with a fixed status (T runs only our code). P is then
orphaned and reparented to the supervisor, the subreaper, which waits for it, kills what it
left and checks. P resets every inherited attribute to the baseline the fork server recorded
before any task ran (`runner/inherited.py`), then runs `task_process.run_task`.

Protocol (SOCK_SEQPACKET, supervisor <-> fork server): `ready` once preloaded; then per task the
supervisor sends `fork` {id} with the task's socket attached; T answers `forked` {pid}, and the
fork server `reaped` once T is gone (P is then the supervisor's child).
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from submission_api.runner import inherited, namespaces
from submission_api.runner.channel import ChannelError, receive_control, send_control

PRELOAD = ("numpy", "torch", "torchvision", "submission_api.api", "submission_api.data",
           "submission_api.runner.participant", "submission_api.runner.task_process")
"""Imported once before any task (never participant code): each task's fork starts with them,
which saves every task their import time and the teardown of what the import allocated."""


@dataclass(frozen=True)
class TaskConfig:
    """What every task's process is started with (the same for all tasks of a run)."""

    submission: Path
    learner: Path
    scratch: tuple[Path, ...]
    seed: int
    threads: int
    sandboxed: bool
    private_namespaces: bool


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - an optional library the image lacks
            continue


class ForkServer:
    """The supervisor's handle on its fork server."""

    def __init__(self, pid: int, sock: socket.socket, baseline: inherited.Attributes) -> None:
        self.pid, self.sock, self.baseline = pid, sock, baseline

    @classmethod
    def start(cls, config: TaskConfig) -> ForkServer:
        """Fork the fork server, wait until it has preloaded; its attributes are the baseline."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            ours.close()
            code = 1
            try:
                code = _serve(theirs, config)
            except BaseException:  # noqa: BLE001 - never fall back into the supervisor's code
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        theirs.close()
        ready, _ = receive_control(ours)
        if ready.get("type") != "ready":
            raise ChannelError(f"the fork server did not start: {ready}")
        return cls(pid, ours, inherited.read_attributes(pid))

    def fork_task(self, task_id: int, task_fd: int) -> int:
        """Start the process of `task_id` on `task_fd`; return its pid (now our child)."""
        send_control(self.sock, {"type": "fork", "id": task_id}, [task_fd])
        forked, _ = receive_control(self.sock)
        reaped, _ = receive_control(self.sock)
        if forked.get("type") != "forked" or reaped.get("type") != "reaped":
            raise ChannelError(f"the fork server could not start test task {task_id}: "
                               f"{forked.get('error') or forked}")
        return int(forked["pid"])

    def stop(self) -> None:
        self.sock.close()  # it exits on EOF; the supervisor's sweep reaps it


def _serve(sock: socket.socket, config: TaskConfig) -> int:
    preload()
    baseline = inherited.capture_baseline()
    send_control(sock, {"type": "ready"})
    while True:
        try:
            message, fds = receive_control(sock, max_fds=1)
        except ChannelError:
            return 0
        if message.get("type") != "fork" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return 0
        sys.stdout.flush()
        sys.stderr.flush()
        child = os.fork()
        if child == 0:
            _start_task(sock, fds[0], int(message["id"]), config, baseline)
        os.close(fds[0])
        os.waitpid(child, 0)  # T exits at once with a fixed status: nothing of the task
        send_control(sock, {"type": "reaped"})


def _start_task(sock: socket.socket, fd: int, task_id: int, config: TaskConfig,
                baseline: inherited.TaskBaseline) -> None:
    """In T: enter the task's namespaces, fork the task's process (the first of its PID
    namespace) and report it, then exit (never returns)."""
    world = None
    if config.private_namespaces:
        try:
            folders = (config.submission, config.learner)
            world = namespaces.enter(config.scratch, folders, copies=folders)
        except OSError as error:  # the task's process refuses to run (task_process.run_task)
            sys.stderr.write(f"the task's namespaces were refused: {error}\n")
    try:
        task = os.fork()
    except OSError as error:
        send_control(sock, {"type": "forked", "pid": None, "error": str(error)})
        os._exit(1)
    if task:
        send_control(sock, {"type": "forked", "pid": task})
        os._exit(0)
    from submission_api.runner.task_process import run_task

    code = 1
    try:
        sock.close()
        inherited.reset_task_process(baseline, {fd})
        code = run_task(fd, task_id, config.submission, config.learner, list(config.scratch),
                        config.seed, config.threads, config.sandboxed,
                        config.private_namespaces, world)
    except BaseException:  # noqa: BLE001 - never fall back into the fork server's loop
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
