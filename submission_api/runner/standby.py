"""T and P, the two processes of one test task: made by the fork server (`runner/forkserver.py`)
before their task is known, where tasks have their own namespaces.

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
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from submission_api.runner import inherited, isolation, namespaces, sweep
from submission_api.runner.channel import ChannelError, receive_control, send_control
from submission_api.runner.task_stdio import TaskStdio


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


@dataclass(frozen=True)
class Standby:
    """A T forked before its task is known: its namespaces entered, its P forked and confined,
    both waiting for the task's id and socket on `handoff`."""

    pid: int
    handoff: socket.socket


def fork_standby(sock: socket.socket, config: TaskConfig, baseline: inherited.TaskBaseline,
                  counters: namespaces.CounterSnapshot | None) -> Standby:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        ours.close()
        _start_task(sock, theirs, config, baseline, counters)
    theirs.close()
    return Standby(child, ours)


def hand_over(standby: Standby, task_id: int, fd: int) -> bool:
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
