"""The meta-test supervisor: the participant side's bookkeeper of task isolation.

It runs where participant code runs (inside the meta-test sandbox, or as `arena run`'s
subprocess) but never imports or calls participant code, and no task is ever forked from it.
At start it forks the fork server (`runner/forkserver.py`: preloads torch, then only forks), then,
for every test task the trusted side releases:

1. receives, on the control connection, a socket that carries that task alone (it never reads
   it) and hands it to the fork server, whose double fork makes the task's process (where tasks
   have their own namespaces, this comes while the previous task still runs: the process only
   converts its images until the trusted side releases it on that socket);
2. waits until the trusted side has collected the answer (then ends the task's process after a
   short grace, at once when the answer was refused, or finds it already ended);
3. kills everything the task left (it is the subreaper), empties the writable places, removes
   the IPC objects made since the start (in the sandbox, whoever owns them now), puts back what
   the task changed on this process and the fork server (rlimits, nice, affinity, stdio flags),
   then checks that all of it is gone, and reports `ended` with a list of what is left (empty:
   verified clean). The trusted side releases the next task only on an empty list.

Before any of it, the supervisor copies the submission and the learner once onto a tmpfs
(`runner/private_copy.py`, `--private-copy`): every task reads them from there, where no task
can change which of their pages are resident.

Usage (the launchers build this): python -m submission_api.runner.supervisor --control SOCKET
    --submission DIR --learner DIR --scratch DIR [--scratch DIR ...] --seed N --threads N
    [--private-copy TMPFS_DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import sys
from pathlib import Path

from submission_api.runner import (
    inherited,
    isolation,
    namespaces,
    private_copy,
    sweep,
    task_root,
)
from submission_api.runner.channel import (
    ChannelError,
    receive_control,
    send_control,
    unix_address,
)
from submission_api.runner.forkserver import ForkServer, ForkServerLost, TaskConfig


def _exit_description(status: int) -> dict[str, int | None]:
    if os.WIFSIGNALED(status):
        return {"exit_code": None, "signal": os.WTERMSIG(status)}
    return {"exit_code": os.WEXITSTATUS(status), "signal": None}


def _ancestors() -> set[int]:
    found, pid = set(), os.getpid()
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        found.add(pid)
    return found | {1}


def _same_uid(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1]) == os.getuid()
    except (OSError, ValueError, IndexError):
        pass
    return False


class Supervisor:
    """The bookkeeping of one meta-test: what the start looked like, and the sweep against it."""

    def __init__(self, config: TaskConfig) -> None:
        self.config = config
        self.stdio = inherited.StdioState.capture()
        self.baseline = inherited.read_attributes(os.getpid())
        self.ipc = sweep.snapshot_ipc()
        self.forks = ForkServer.start(config)
        self.own = {os.getpid(), self.forks.pid, *_ancestors()}
        # In the sandbox, ancestors of our uid (its init) can be changed by a task and read by
        # the next one as well: their attributes are checked like ours. (Under `arena run`
        # they are the participant's own shell and tools: docs/internals.md, what remains.)
        self.ancestors = {pid: inherited.read_attributes(pid) for pid in _ancestors()
                          if config.sandboxed and _same_uid(pid)}
        # In shared namespaces a task has no read-only mount view: what it could change on the
        # private copy (modes, by chmod) is checked after each task.
        # The run's copy folder, or in the sandbox the whole tmpfs it is on (the run's own).
        watched = [] if config.private_namespaces or not config.copies else [
            config.copies[0].parent.parent if config.sandboxed else config.copies[0].parent]
        self.copies = watched
        self.copy_state = private_copy.fingerprint(self.copies)

    def start(self, task_id: int, task_fd: int) -> None:
        """Have the fork server start `task_id`'s process on `task_fd` (its socket, which only
        that process then holds); its report is read when the task is collected."""
        try:
            self.forks.request(task_id, task_fd)
        finally:
            os.close(task_fd)  # only the task's process holds it: its end is an EOF

    def collect(self, task_id: int, grace_s: float) -> dict:
        """End `task_id`'s process (after `grace_s` unless it ends first), sweep; returns the
        `ended` report (with `platform` when the fork server or the task's reaper was lost:
        forkserver.ForkServerLost)."""
        try:
            process = self.forks.process(task_id)
            try:
                status, killed = self._wait(task_id, process, grace_s)
            finally:
                os.close(process)
        except ForkServerLost as error:
            return {"type": "ended", "id": task_id, "platform": str(error)[:500],
                    "reachable": not self.config.private_namespaces, "left": []}
        left = self.sweep()
        return {"type": "ended", "id": task_id, **_exit_description(status),
                "killed_by_supervisor": killed, "left": left}

    def _wait(self, task_id: int, process: int, grace_s: float) -> tuple[int, bool]:
        """Until the end of the task's process (`process`: a pidfd of it, which stays its own
        however soon it ends), killed after `grace_s`; (wait status, killed). The process is
        T's child, not ours: T reaps it and reports the status (`runner/forkserver.py`, why)."""
        grace = min(max(grace_s, 0.0), 30.0)
        ended = bool(select.select([process], [], [], grace)[0])
        if not ended:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(process, signal.SIGKILL)
        return self.forks.exit_status(task_id), not ended

    def sweep(self) -> list[str]:
        """Remove what the last task left; return what is still there (empty: verified)."""
        sweep.kill_descendants(keep={self.forks.pid})
        left: list[str] = []
        if self.config.sandboxed:  # the container's uid is the run's alone
            # With the task's own namespaces, what is below the fork server once the task's T
            # is gone is the next task's standby (runner/standby.py), which the fork server may
            # be forking right now: a task's processes die with its PID namespace and cannot
            # make a process elsewhere.
            below = self.forks.pid if self.config.private_namespaces else None
            for pid in sweep.stray_processes(os.getuid(), self.own, below):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            left += [f"process {pid}"
                     for pid in sweep.stray_processes(os.getuid(), self.own, below)]
        for folder in self.config.scratch:
            left += sweep.empty_folder(folder)
        if self.config.sandboxed:
            left += sweep.remove_new_ipc(self.ipc)
        elif not self.config.private_namespaces:  # shared with this machine: only what we made
            left += sweep.remove_new_ipc(self.ipc, creator=os.getuid())
        if os.waitpid(self.forks.pid, os.WNOHANG)[0]:
            return [*left, "the fork server was ended by a task"]
        left += inherited.restore_attributes(os.getpid(), self.baseline, "the supervisor")
        left += inherited.restore_attributes(self.forks.pid, self.forks.baseline,
                                             "the fork server")
        for pid, attributes in self.ancestors.items():
            left += inherited.restore_attributes(pid, attributes, f"process {pid}")
        left += self.stdio.restore()
        left += private_copy.changed(self.copy_state, self.copies)
        stopped = self.forks.check_stopped(reachable=not self.config.private_namespaces)
        return [*left, stopped] if stopped else left


def serve(control_path: Path, submission: Path, learner: Path, scratch: list[Path],
          seed: int, threads: int, sandboxed: bool = False,
          copy_space: Path | None = None) -> int:
    """Serve tasks until the trusted side says `end` or goes away; return the exit code."""
    isolation.protect_supervisor()
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with unix_address(control_path) as address:
        control.connect(address)
    try:
        copies, copied = private_copy.make_for_run([submission, learner], copy_space)
    except private_copy.CopyTooLarge as error:
        send_control(control, {"type": "hello", "pid": os.getpid(), "refused": str(error)})
        return 0
    # the whole setup, tried in a throwaway child: a host whose AppArmor profile denies mount
    # refuses it half-way, and its tasks then share namespaces
    # the sandbox's only: elsewhere a copy of the machine's Python would be too large
    root, no_root = task_root.for_run(copy_space, scratch, [submission, learner]) \
        if sandboxed else (None, "")
    private = namespaces.probe(scratch, [submission, learner])
    if root is not None and not private:  # the root refused half-way: namespaces without it
        task_root.use(None)
        task_root.remove(root.folder)
        root, no_root = None, "refused when tried"
        private = namespaces.probe(scratch, [submission, learner])
    if copies and not private:  # no mount namespace to bind them over the originals
        submission, learner = copies
        copied += " (the originals stay readable in place)"
    config = TaskConfig(submission, learner, tuple(scratch), seed, threads, sandboxed,
                        private_namespaces=private, copies=tuple(copies))
    try:
        supervisor = Supervisor(config)
    except ForkServerLost as error:  # killed at start-up: no task had run (a platform fault)
        send_control(control, {"type": "hello", "pid": os.getpid(), "platform": str(error)})
        return 0
    rooted = f"{task_root.describe(root if private else None, no_root)}; " if sandboxed else ""
    send_control(control, {"type": "hello", "pid": os.getpid(), "private": private,
                           "isolation": f"{namespaces.describe(private)}; {rooted}submission and "
                                        f"learner {copied}; {isolation.describe()}"})
    try:
        while True:
            try:
                message, fds = receive_control(control, max_fds=1)
            except ChannelError:
                return 0  # the trusted side is done with us (or gone): nothing left to do
            kind = message.get("type")
            if kind == "task" and len(fds) == 1:  # start its process: it waits for its release
                try:
                    supervisor.start(int(message["id"]), fds[0])
                except ChannelError as error:
                    sys.stderr.write(f"arena supervisor: test task {message.get('id')}: "
                                     f"{error}\n")
                    return 0
                continue
            for fd in fds:
                os.close(fd)
            if kind != "collect":
                return 0
            try:
                ended = supervisor.collect(int(message["id"]),
                                           float(message.get("grace_s") or 0.0))
            except ChannelError as error:
                # the trusted side stopped waiting (its deadline): it has its verdict; said
                # here for the operator, since a lost fork server ends the same way
                sys.stderr.write(f"arena supervisor: test task {message.get('id')}: {error}\n")
                return 0
            send_control(control, ended)
    finally:
        supervisor.forks.stop()
        try:
            sweep.kill_descendants()
        finally:  # the run's copy goes even when a process outlived the last sweep
            if copies:
                private_copy.remove(copies[0].parent)
            if root is not None:
                task_root.remove(root.folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--learner", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, action="append", default=[])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--private-copy", type=Path, default=None,
                        help="a tmpfs folder for the run's copy of the submission and learner")
    parser.add_argument("--sandboxed", action="store_true",
                        help="the container is the run's own: sweep all of its IPC and /dev/shm")
    args = parser.parse_args(argv)
    return serve(args.control, args.submission.resolve(), args.learner.resolve(),
                 [p.resolve() for p in args.scratch], args.seed, args.threads, args.sandboxed,
                 args.private_copy)


if __name__ == "__main__":
    sys.exit(main())
