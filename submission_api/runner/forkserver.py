"""The fork server: the clean process every test task's process is forked from.

It imports torch and our modules once (so a task starts as a cheap fork) and then only forks:
it never runs participant code, never sweeps, never waits for a task or reads anything a task
produced. So nothing of task i is in its memory when task i+1 is forked from it: not the exit
status, not the names of the files the sweep found (the supervisor, which does that
bookkeeping, is a separate process that tasks are never forked from).

Each fork is a double fork: the fork server's child T enters the task's own namespaces and
fresh tmpfs mounts where the supervisor found them possible (`runner/namespaces.py`), forks the
task's process P (the first process of the new PID namespace) and reports P's pid to the
supervisor. T (our code only) then waits for P, reports P's wait status and exits. P resets
every inherited attribute to the baseline the fork server recorded before any task ran
(`runner/inherited.py`), confines itself (`task_process.confine_task`), then runs
`task_process.run_task`; the supervisor, the subreaper, ends P when its answer is in, kills
what it left and checks.

Why T waits rather than the supervisor: the process that reaps a child adds the child's CPU
time and page faults to its own children's counters (`cutime`, `cstime`, `cminflt`, `cmajflt` in
/proc/<pid>/stat), which every later task can read. A task that burns chosen CPU time or touches
a chosen number of pages would leave a number there for the next. T, a subreaper, reaps P and
whatever P left (in shared namespaces; in its own PID namespace P's processes die with it),
takes their counters and dies with them; the fork server ignores SIGCHLD, so the kernel reaps T
without adding its counters to anyone's (the census checks that the trusted processes'
counters never move).

T and P are made before their task is released (a standby): where tasks have their own
namespaces, the trusted side asks for the next task as soon as it has released the current one,
so that the forks, the namespaces, P's confinement and the conversion of the next task's images
(our code only, ~20-60 ms) happen while the current task runs instead of between tasks; P waits
for its release on its task's socket before it imports anything of the submission. Until then
it runs no participant code and holds nothing but its own task; the running task cannot reach
it (a sibling PID and user namespace: it cannot name, signal, `prlimit` or trace it, and shares
no writable place with it). In shared namespaces it could, so there each T is forked when its
task is asked for, at its turn.

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
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from submission_api.runner import inherited, isolation, namespaces, sweep
from submission_api.runner.channel import ChannelError, receive_control, send_control
from submission_api.runner.task_stdio import TaskStdio

EXIT_REPORT_S = 30.0
"""How long the supervisor waits for T's report once P has ended (T only reaps it)."""
FORK_REPORT_S = 30.0
"""How long the supervisor waits for T's `forked` (a standby is ready: one message; else a fork,
the namespaces and P's confinement, ~20 ms, seconds on a loaded host)."""


class ForkServerLost(ChannelError):
    """The fork server or a task's T (platform code) ended or stopped answering."""

PRELOAD = ("numpy", "torch", "torchvision", "submission_api.api", "submission_api.data",
           "submission_api.sampling.seeds", "submission_api.runner.participant",
           "submission_api.runner.task_process")
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
    copies: tuple[Path, ...] = ()
    """The run's private tmpfs copies of `submission` and `learner` (`runner/private_copy.py`),
    bound over them in each task's mount namespace; empty: read in place."""


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


@dataclass(frozen=True)
class _Standby:
    """A T forked before its task is known: its namespaces entered, its P forked and confined,
    both waiting for the task's id and socket on `handoff`."""

    pid: int
    handoff: socket.socket


def _serve(sock: socket.socket, config: TaskConfig) -> int:
    preload()
    baseline = inherited.capture_baseline()
    counters = namespaces.snapshot_counters() if config.private_namespaces else None
    # The kernel reaps each T: no task's counters are added to ours (the module's docstring).
    # After the baseline: the tasks' dispositions are reset to fixed values anyway.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    def standby() -> _Standby:
        return _fork_standby(sock, config, baseline, counters)

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
        if not _hand_over(current, task_id, fds[0]):  # gone (killed for memory, say)
            current = standby()
            if not _hand_over(current, task_id, fds[0]):
                send_control(sock, {"type": "forked", "id": task_id,
                                    "error": "the task's processes could not be started"})
        os.close(fds[0])  # T reports to the supervisor itself; the kernel reaps it
        # The next task's T and P, made now: our code only, in namespaces no task can reach;
        # they take the next task's socket and nothing else. Where tasks have their own
        # namespaces that task is asked for as soon as this one is released (task_server), so
        # three Ts can be alive: the running task's, the next one's, converting its images,
        # and this empty standby.
        ahead = standby() if config.private_namespaces else None


def _fork_standby(sock: socket.socket, config: TaskConfig, baseline: inherited.TaskBaseline,
                  counters: namespaces.CounterSnapshot | None) -> _Standby:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        ours.close()
        _start_task(sock, theirs, config, baseline, counters)
    theirs.close()
    return _Standby(child, ours)


def _hand_over(standby: _Standby, task_id: int, fd: int) -> bool:
    """Give `standby` its task; False when it is gone."""
    try:
        send_control(standby.handoff, {"type": "task", "id": task_id}, [fd])
    except OSError:
        return False
    finally:
        standby.handoff.close()
    return True


def _start_task(sock: socket.socket, handoff: socket.socket, config: TaskConfig,
                baseline: inherited.TaskBaseline,
                counters: namespaces.CounterSnapshot | None) -> None:
    """In T: enter the task's namespaces, fork the task's process P (the first of its PID
    namespace), which confines itself; when the task arrives on `handoff`, pass it to P,
    report P, wait for it and report how it ended, then exit (never returns)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # T waits for P (the fork server ignores it)
    isolation.become_subreaper()  # and for what P leaves (shared namespaces): not the supervisor
    world = None
    if config.private_namespaces:
        try:
            folders = (config.submission, config.learner)
            world = namespaces.enter(config.scratch, folders,
                                     copies=tuple(zip(folders, config.copies, strict=False)),
                                     frozen=counters)
        except OSError as error:  # the task's process refuses to run (confine_task)
            sys.stderr.write(f"the task's namespaces were refused: {error}\n")
    to_task, from_t = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stdio = TaskStdio()  # the task's own stdout and stderr, relayed by T (issue 34.5)
    try:
        task = os.fork()
    except OSError as error:
        with contextlib.suppress(ChannelError):
            asked, fds = receive_control(handoff, max_fds=1)  # asked for: say why there is none
            for fd in fds:
                os.close(fd)
            send_control(sock, {"type": "forked", "id": asked.get("id"), "error": str(error)})
        os._exit(1)
    if task:
        from_t.close()
        stdio.close_write_ends()
        _pass_on_and_reap(sock, handoff, to_task, task, stdio)
    from submission_api.runner.task_process import confine_task, run_task

    code = 1
    try:
        sock.close()
        handoff.close()
        to_task.close()
        stdio.attach()
        inherited.reset_task_process(baseline, {from_t.fileno()})
        failure: BaseException | None = None
        try:
            confine_task(list(config.scratch), config.sandboxed, config.private_namespaces,
                         world)
        except BaseException as error:  # noqa: BLE001 - reported once there is a task
            failure = error
        try:
            message, fds = receive_control(from_t, max_fds=1)
        except ChannelError:
            os._exit(0)  # never given a task: the run ended first
        from_t.close()
        if failure is not None or len(fds) != 1:
            raise failure or ChannelError("no task socket arrived")
        code = run_task(fds[0], int(message["id"]), config.submission, config.learner,
                        config.seed, config.threads)
    except BaseException:  # noqa: BLE001 - never fall back into the fork server's loop
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _pass_on_and_reap(sock: socket.socket, handoff: socket.socket, to_task: socket.socket,
                      task: int, stdio: TaskStdio) -> NoReturn:
    """T once P is forked: wait for the task, hand it to P, report, reap, report, exit."""
    try:
        message, fds = receive_control(handoff, max_fds=1)
    except ChannelError:
        os._exit(0)  # the fork server is gone (the run ended): P sees the end of `to_task`
    handoff.close()
    try:
        task_id = int(message["id"])
        send_control(to_task, message, fds)
    except (OSError, ValueError, KeyError) as error:
        send_control(sock, {"type": "forked", "id": message.get("id"),
                            "error": f"the task's process is gone: {error}"})
        os._exit(1)
    finally:
        for fd in fds:
            os.close(fd)  # only P holds the task's socket: its end is the trusted side's EOF
        to_task.close()
    # pidfds opened before P can be reaped (only T reaps it), so they name P and T however
    # soon P ends (ForkServer.fork_task)
    pidfds = [os.pidfd_open(task), os.pidfd_open(os.getpid())]
    send_control(sock, {"type": "forked", "id": task_id}, pidfds)
    for fd in pidfds:
        os.close(fd)
    stdio.relay_until_exit(task)
    status = os.waitpid(task, 0)[1]
    sweep.kill_descendants()  # reaped here, so their counters die with T too
    stdio.drain()
    send_control(sock, {"type": "exited", "id": task_id, "status": status})
    os._exit(0)
