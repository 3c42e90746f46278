"""The meta-test supervisor: the participant side's half of task isolation.

It runs where participant code runs (inside the meta-test sandbox, or as `arena run`'s
subprocess) but never imports or calls participant code. It imports torch once, so that each
task's process starts as a cheap fork, then, for every test task the trusted side releases:

1. receives, on the control connection, a socket that carries that task alone (it never reads
   it: the task's pixels never enter the supervisor, so no fork inherits them);
2. forks a fresh process that confines itself, imports `model.py`, loads the learner (read-only),
   reads the task from that socket, fits, predicts and answers on the same socket;
3. when that process ends, kills everything it left (the supervisor is a subreaper), empties the
   scratch folders and removes the IPC objects it made, then tells the trusted side, which only
   then releases the next task.

Usage (the launchers build this): python -m submission_api.runner.supervisor --control SOCKET
    --submission DIR --learner DIR --scratch DIR [--scratch DIR ...] --seed N --threads N
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import traceback
from pathlib import Path

from submission_api.runner import isolation
from submission_api.runner.channel import ChannelError, receive_control, send_control

PRELOAD = ("numpy", "torch", "torchvision", "submission_api.api", "submission_api.data",
           "submission_api.runner.participant", "submission_api.runner.task_process")
"""Imported once before any task (never participant code): each task's fork starts with them,
which saves every task their import time and the teardown of what the import allocated."""


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - an optional library the image lacks
            continue


def _exit_description(status: int) -> dict[str, int | None]:
    if os.WIFSIGNALED(status):
        return {"exit_code": None, "signal": os.WTERMSIG(status)}
    return {"exit_code": os.WEXITSTATUS(status), "signal": None}


def serve(control_path: Path, submission: Path, learner: Path, scratch: list[Path],
          seed: int, threads: int, sandboxed: bool = False) -> int:
    """Serve tasks until the trusted side says `end` or goes away; return the exit code."""
    from submission_api.runner.task_process import run_task

    isolation.protect_supervisor()
    preload()
    before = isolation.snapshot_ipc()
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    control.connect(str(control_path))
    send_control(control, {"type": "hello", "pid": os.getpid(),
                           "isolation": isolation.describe()})
    while True:
        try:
            message, fds = receive_control(control, max_fds=1)
        except ChannelError:
            return 0  # the trusted side is done with us (or gone): nothing left to do
        if message.get("type") != "task" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return 0
        task_id = int(message["id"])
        pid = os.fork()
        if pid == 0:  # the task's process: it must not keep the supervisor's channel
            control.close()
            code = 1
            try:
                code = run_task(fds[0], task_id, submission, learner, scratch, seed, threads,
                                sandboxed)
            except BaseException:  # noqa: BLE001 - never fall back into the supervisor's loop
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        os.close(fds[0])
        _, status = os.waitpid(pid, 0)
        killed = isolation.kill_descendants()
        for folder in scratch:
            isolation.empty_folder(folder)
        # In the sandbox every IPC object and /dev/shm file is the run's; elsewhere each task had
        # namespaces of its own (task_process), and nothing of anyone else's may be touched.
        removed = isolation.remove_new_ipc(before) if sandboxed else 0
        send_control(control, {"type": "ended", "id": task_id, **_exit_description(status),
                               "killed": killed, "ipc_removed": removed})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--learner", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, action="append", default=[])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sandboxed", action="store_true",
                        help="the container is the run's own: sweep all of its IPC and /dev/shm")
    args = parser.parse_args(argv)
    return serve(args.control, args.submission.resolve(), args.learner.resolve(),
                 [p.resolve() for p in args.scratch], args.seed, args.threads, args.sandboxed)


if __name__ == "__main__":
    sys.exit(main())
