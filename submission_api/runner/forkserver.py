"""The fork server: the clean process every test task's process is forked from.

It imports torch and our modules once (so a task starts as a cheap fork) and then only forks:
it never runs participant code, never sweeps, never waits for a task or reads anything a task
produced. So nothing of task i is in its memory when task i+1 is forked from it: not the exit
status, not the names of the files the sweep found (the supervisor, which does that
bookkeeping, is a separate process that tasks are never forked from).

Each fork is a double fork: the fork server's child T (the task's reaper) forks the task's
process P; where tasks have their own namespaces, T and P are made ahead, as a standby
(`runner/standby.py`: what T and P do, and why T waits rather than the supervisor).

Protocol (SOCK_SEQPACKET, supervisor <-> fork server): `ready` once preloaded; then per task the
supervisor sends `fork` {id} with the task's socket attached, which the fork server hands to the
standby T (`task` {id}, the socket attached) and T to its P; T answers `forked` {id} with
pidfds of P and of itself attached (or `forked` {id, error} without them) and, when P has ended,
`exited` {id, status} (P's wait status). A task may be asked for while the one before it runs
(where tasks have their own namespaces), so the reports of two tasks interleave: each names its
task.

Faults of the fork server and of T are the host's, never a task's where the task has its own
namespaces (it cannot name, signal or trace them): every wait on them has a deadline
(`FORK_REPORT_S`, `EXIT_REPORT_S`) and a lost one raises `ForkServerLost`, which the supervisor
reports as a platform fault (retried, uncharged) rather than hanging to the run's wall clock
(issue 36: a killed T once left `fork_task` waiting for `forked` forever, charged `timed_out`).
In shared namespaces a task could kill T itself, so there the loss is reported as reachable
(an unexplained kill, uncharged but counted). A stop of the fork server is judged the same way
(`check_stopped`): a ptrace stop (a profiler on the host) or, in the task's own namespaces, any
stop is not the task's doing.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

from submission_api.runner import inherited, namespaces
from submission_api.runner.channel import ChannelError, receive_control, send_control
from submission_api.runner.standby import Standby, TaskConfig, fork_standby, hand_over

EXIT_REPORT_S = float(os.environ.get("ARENA_EXIT_REPORT_S", "30"))
"""How long the supervisor waits for T's report once P has ended (T only reaps it). The
environment variable is for tests that kill T and would otherwise wait the 30 s out."""
FORK_REPORT_S = float(os.environ.get("ARENA_FORK_REPORT_S", "30"))
"""How long the supervisor waits for T's `forked` (a standby is ready: one message; else a fork,
the namespaces and P's confinement, ~20 ms, seconds on a loaded host). Set like EXIT_REPORT_S."""


class ForkServerLost(ChannelError):
    """The fork server or a task's T (platform code) ended or stopped answering."""

PRELOAD = ("numpy", "torch", "torchvision", "submission_api.api", "submission_api.data",
           "submission_api.sampling.seeds", "submission_api.runner.participant",
           "submission_api.runner.task_process")
"""Imported once before any task (never participant code): each task's fork starts with them,
which saves every task their import time and the teardown of what the import allocated."""


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - an optional library the image lacks
            continue
    # The first seeding of numpy's and torch's generators in a process costs ~15 ms; done here
    # once, with a constant, every task's fork only reseeds (task_process.seed_task).
    from submission_api.runner.task_process import seed_task

    seed_task(0, 0)
    # Every object made so far is shared with each fork: kept out of the collector's passes,
    # which would otherwise write to (and so copy) every page that holds one, in every task.
    gc.freeze()


class ForkServer:
    """The supervisor's handle on its fork server."""

    def __init__(self, pid: int, sock: socket.socket, baseline: inherited.Attributes) -> None:
        self.pid, self.sock, self.baseline = pid, sock, baseline
        # Reports by task id: a task started ahead is reported while the one before it runs,
        # so `forked` and `exited` of two tasks arrive interleaved.
        self._forked: dict[int, tuple[dict, list[int]]] = {}
        self._exited: dict[int, int] = {}
        self._lost: dict[int, str] = {}
        self._reapers: dict[int, int] = {}  # a pidfd of each started task's T

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
        try:
            ready, _ = receive_control(ours)
        except ChannelError as error:  # killed while it preloaded: no task had run
            ours.close()
            raise ForkServerLost(f"the fork server (platform code) ended before it was ready: "
                                 f"{error}") from error
        if ready.get("type") != "ready":
            raise ForkServerLost(f"the fork server did not start: {ready}")
        return cls(pid, ours, inherited.read_attributes(pid))

    def fork_task(self, task_id: int, task_fd: int) -> int:
        """Start the process of `task_id` on `task_fd`; return a pidfd of it (`process`)."""
        self.request(task_id, task_fd)
        return self.process(task_id)

    def request(self, task_id: int, task_fd: int) -> None:
        """Ask for `task_id`'s process on `task_fd` (where tasks have their own namespaces,
        the standby made while the previous task ran takes it); its report is read by
        `process`. A fork server gone is reported there too."""
        try:
            send_control(self.sock, {"type": "fork", "id": task_id}, [task_fd])
        except OSError as error:
            self._lost[task_id] = f"the fork server did not take test task {task_id}: {error}"

    def process(self, task_id: int) -> int:
        """A pidfd of `task_id`'s process (T's child; the caller closes it).

        T sends pidfds of the task's process and of itself, opened while both are T's to
        reap: a task that ends before the supervisor looks (a quick task on a busy host) is
        still named by them, and no pid can have been reused for another process meanwhile.

        Raises:
            ForkServerLost: no report within FORK_REPORT_S (T or the fork server killed).
            ChannelError: the fork server could not start the task's processes.
        """
        deadline = time.monotonic() + FORK_REPORT_S
        while task_id not in self._forked:
            if task_id in self._lost:
                raise ForkServerLost(self._lost[task_id])
            try:
                self._file_report(deadline)
            except (ChannelError, OSError) as error:  # T or the fork server killed
                raise ForkServerLost(f"the fork server did not report test task {task_id}'s "
                                     f"process within {FORK_REPORT_S:g} s: {error}") from error
        forked, fds = self._forked.pop(task_id)
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            raise ChannelError(f"the fork server could not start test task {task_id}: "
                               f"{forked.get('error') or forked}")
        process, self._reapers[task_id] = fds
        return process

    def _file_report(self, deadline: float) -> None:
        """Read one report of the fork server or a T and file it under its task."""
        report, fds = receive_control(self.sock, deadline, max_fds=2)
        task_id = report.get("id")
        if not isinstance(task_id, int) or report.get("type") not in ("forked", "exited"):
            for fd in fds:
                os.close(fd)
            raise ChannelError(f"the fork server reported {str(report)[:200]}")
        if report["type"] == "forked":
            self._forked[task_id] = (report, fds)
        else:
            for fd in fds:
                os.close(fd)
            self._exited[task_id] = int(report["status"])

    def exit_status(self, task_id: int, wait_s: float = EXIT_REPORT_S) -> int:
        """P's wait status, as T reports it once P has ended.

        Raises:
            ForkServerLost: no report within `wait_s` (T was killed: the memory bound, or the
                host).
        """
        deadline = time.monotonic() + wait_s
        while task_id not in self._exited:
            try:
                self._file_report(deadline)
            except (ChannelError, OSError) as error:
                raise ForkServerLost(f"test task {task_id}'s reaper (platform code) did not "
                                     f"report how the task ended within {wait_s:g} s: "
                                     f"{error}") from error
        self._await_reaper(task_id, deadline)
        return self._exited.pop(task_id)

    def _await_reaper(self, task_id: int, deadline: float) -> None:
        """Until T, which exits right after its report, is gone (the sweep then finds nothing
        of it; the kernel reaps it at once)."""
        reaper = self._reapers.pop(task_id, None)
        if reaper is None:
            return
        try:
            select.select([reaper], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(reaper)

    def check_stopped(self, reachable: bool) -> str | None:
        """What the sweep should blame on the last task if the fork server is stopped, else
        None. A job-control stop is resumed (SIGCONT); it is the task's doing only where the
        task could signal the fork server (`reachable`: shared namespaces). A ptrace stop is a
        tracer's on the host (the task's processes are gone by now, and in its own namespaces
        it can trace nothing outside): never blamed, and left to its tracer."""
        try:
            state = Path(f"/proc/{self.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            tracer = next((int(line.split()[1]) for line in
                           Path(f"/proc/{self.pid}/status").read_text().splitlines()
                           if line.startswith("TracerPid:")), 0)
        except (OSError, IndexError, ValueError):
            return None
        if state == b"t" or tracer:
            sys.stderr.write(f"arena supervisor: the fork server is traced by process {tracer} "
                             "(a profiler or debugger on the host); not the task's doing\n")
            return None
        if state != b"T":
            return None
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)
        return "the fork server was stopped by a task" if reachable else None

    def stop(self) -> None:
        self.sock.close()  # it exits on EOF; the supervisor's sweep reaps it


def _serve(sock: socket.socket, config: TaskConfig) -> int:
    preload()
    baseline = inherited.capture_baseline()
    counters = namespaces.snapshot_counters() if config.private_namespaces else None
    # The kernel reaps each T: no task's counters are added to ours (the module's docstring).
    # After the baseline: the tasks' dispositions are reset to fixed values anyway.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    def standby() -> Standby:
        return fork_standby(sock, config, baseline, counters)

    # Ahead only in the task's own namespaces: there a running task cannot name, signal or
    # `prlimit` the next task's processes (a sibling PID and user namespace); in shared ones
    # it could, so each T is forked when its task is asked for.
    ahead = standby() if config.private_namespaces else None
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
        task_id = int(message["id"])
        current = ahead or standby()
        if not hand_over(current, task_id, fds[0]):  # gone (killed for memory, say)
            current = standby()
            if not hand_over(current, task_id, fds[0]):
                send_control(sock, {"type": "forked", "id": task_id,
                                    "error": "the task's processes could not be started"})
        os.close(fds[0])  # T reports to the supervisor itself; the kernel reaps it
        # The next task's T and P, made now: our code only, in namespaces no task can reach;
        # they take the next task's socket and nothing else. Where tasks have their own
        # namespaces that task is asked for as soon as this one is released (task_server), so
        # three Ts can be alive: the running task's, the next one's, converting its images,
        # and this empty standby.
        ahead = standby() if config.private_namespaces else None
