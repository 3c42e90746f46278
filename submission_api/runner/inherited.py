"""The process attributes one test task could pass to the next, and their fixed values.

A task's process is a fork: it inherits its parent's rlimits, nice value, CPU affinity, umask,
signal dispositions and mask, environment, open descriptors and session. And a task runs under
the same uid as the processes it is forked from (the fork server) and reported to (the
supervisor), so it can change some of their attributes from outside: `prlimit(getppid(), ...)`,
`setpriority`, `sched_setaffinity`, the flags and pipe size of the stdio they share. Each is a
channel to the next task. So:

- `capture_baseline` records them once, in the fork server, before any task ran;
  `reset_task_process` sets every one of them to that baseline in the task's process, before any
  participant code runs (a task starts from the same values whatever ran before it);
- `restore_attributes` / `StdioState.restore`, in the supervisor after each task, put back what a
  task changed on the supervisor and the fork server, and return what they could not put back
  (a lowered hard limit, a raised nice value: an unprivileged process cannot undo them), which
  fails the run as the participant's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import signal
from dataclasses import dataclass

RLIMITS = {name: getattr(resource, name) for name in sorted(dir(resource))
           if name.startswith("RLIMIT_")}
TASK_UMASK = 0o022
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PYTHON_IGNORED = {signal.SIGPIPE, getattr(signal, "SIGXFSZ", signal.SIGPIPE)}
"""The dispositions CPython sets at start-up (SIGINT gets its KeyboardInterrupt handler)."""


@dataclass(frozen=True)
class Attributes:
    """What another process of the same uid may change on a process from outside."""

    rlimits: tuple[tuple[str, int, int], ...]
    nice: int
    affinity: frozenset[int]


def read_attributes(pid: int) -> Attributes:
    """Raises ProcessLookupError when `pid` is gone."""
    rlimits = tuple((name, *resource.prlimit(pid, number)) for name, number in RLIMITS.items())
    return Attributes(rlimits, os.getpriority(os.PRIO_PROCESS, pid),
                      frozenset(os.sched_getaffinity(pid)))


def restore_attributes(pid: int, baseline: Attributes, who: str) -> list[str]:
    """Put `baseline` back on `pid`; return a line for each attribute still changed after."""
    try:
        current = read_attributes(pid)
    except (ProcessLookupError, PermissionError):
        return [f"{who} (pid {pid}) is gone: a task ended or changed it"]
    for (name, soft, hard), now in zip(baseline.rlimits, current.rlimits, strict=True):
        if now[1:] != (soft, hard):
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(pid, RLIMITS[name], (soft, hard))
    if current.nice != baseline.nice:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, baseline.nice)
    if current.affinity != baseline.affinity:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, baseline.affinity)
    try:
        after = read_attributes(pid)
    except (ProcessLookupError, PermissionError):
        return [f"{who} (pid {pid}) is gone: a task ended it"]
    left = [f"{name} of {who} is {now[1:]} (was {(soft, hard)})" for (name, soft, hard), now
            in zip(baseline.rlimits, after.rlimits, strict=True) if now[1:] != (soft, hard)]
    if after.nice != baseline.nice:
        left.append(f"the nice value of {who} is {after.nice} (was {baseline.nice})")
    if after.affinity != baseline.affinity:
        left.append(f"the CPU affinity of {who} is {sorted(after.affinity)}")
    return left


@dataclass(frozen=True)
class StdioState:
    """Status flags (O_APPEND, O_NONBLOCK) and pipe sizes of fds 0-2: their open file
    descriptions are shared with every task, so a task's `fcntl` on its own stdout changes the
    supervisor's, and the next task's."""

    flags: tuple[tuple[int, int, int | None], ...]

    @classmethod
    def capture(cls) -> StdioState:
        found = []
        for fd in (0, 1, 2):
            with contextlib.suppress(OSError):
                size = None
                with contextlib.suppress(OSError):
                    size = fcntl.fcntl(fd, F_GETPIPE_SZ)
                found.append((fd, fcntl.fcntl(fd, fcntl.F_GETFL), size))
        return cls(tuple(found))

    def restore(self) -> list[str]:
        """Put the flags and pipe sizes back; return a line for each still changed."""
        left = []
        for fd, flags, size in self.flags:
            with contextlib.suppress(OSError):
                if fcntl.fcntl(fd, fcntl.F_GETFL) != flags:
                    fcntl.fcntl(fd, fcntl.F_SETFL, flags)
                if size is not None and fcntl.fcntl(fd, F_GETPIPE_SZ) != size:
                    fcntl.fcntl(fd, F_SETPIPE_SZ, size)
            with contextlib.suppress(OSError):
                if fcntl.fcntl(fd, fcntl.F_GETFL) != flags:
                    left.append(f"the status flags of the supervisor's fd {fd}")
                if size is not None and fcntl.fcntl(fd, F_GETPIPE_SZ) != size:
                    left.append(f"the pipe size of the supervisor's fd {fd}")
        return left


@dataclass(frozen=True)
class TaskBaseline:
    """The values every task's process starts with (captured before any task ran)."""

    attributes: Attributes
    environ: tuple[tuple[str, str], ...]


def capture_baseline() -> TaskBaseline:
    return TaskBaseline(read_attributes(os.getpid()), tuple(sorted(os.environ.items())))


def _reset_signals() -> None:
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        handler = (signal.default_int_handler if number == signal.SIGINT
                   else signal.SIG_IGN if number in PYTHON_IGNORED else signal.SIG_DFL)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(number, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _close_descriptors(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _within(soft: int, hard: int, current_hard: int) -> tuple[int, int]:
    """(soft, hard) lowered to what an unprivileged process may set under `current_hard` (a hard
    limit only goes down; the supervisor checked it is still the baseline's)."""
    infinity = resource.RLIM_INFINITY

    def below(a: int, b: int) -> int:  # the smaller limit, RLIM_INFINITY being the largest
        return b if a == infinity else a if b == infinity else min(a, b)

    hard = below(hard, current_hard)
    return below(soft, hard), hard


def reset_task_process(baseline: TaskBaseline, keep_fds: set[int]) -> None:
    """Set this (task) process's inherited attributes to `baseline`; call before any
    participant code. A new session, so no signal to a process group reaches the supervisor."""
    with contextlib.suppress(OSError):
        os.setsid()
    _close_descriptors(keep_fds)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for name, soft, hard in baseline.attributes.rlimits:
        number = RLIMITS[name]
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(number, _within(soft, hard, resource.getrlimit(number)[1]))
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, baseline.attributes.nice)
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, baseline.attributes.affinity)
    os.umask(TASK_UMASK)
    _reset_signals()
    os.environ.clear()
    os.environ.update(dict(baseline.environ))
