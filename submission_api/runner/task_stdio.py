"""A test task's own stdout and stderr (issue 34.5): a pipe of its own for each, relayed by its
reaper.

A process may always open its own descriptors again through /proc/self/fd, read-only too,
dumpable or not. Were a task's fds 1 and 2 the run's pipes (the sandbox's stdout and stderr,
shared by every task, the supervisor and the fork server), a task could open /proc/self/fd/1
for reading and take what earlier tasks wrote that the worker's log pump had not yet drained,
and set flags or a pipe size on them for the next task to find. Instead T, the task's reaper
(`runner/forkserver.py`), makes two fresh pipes before it forks the task's process P; P writes
to them only, and T copies what arrives to the run's own stdout and stderr while P runs, then
what is left once P and everything it made are gone. A task reading its fd 1 back reads its
own output, and nothing it sets on its pipes outlives it.
"""

from __future__ import annotations

import contextlib
import os
import select

CHUNK = 1 << 16


class TaskStdio:
    """The task's two pipes: made in T before P is forked, `attach` in P, `relay_until_exit`
    then `drain` in T."""

    def __init__(self) -> None:
        self.pipes = [os.pipe(), os.pipe()]  # (read end, write end) for fds 1 and 2

    def attach(self) -> None:
        """In P: the pipes' write ends become fds 1 and 2; no other end stays open."""
        for target, (read_end, write_end) in zip((1, 2), self.pipes, strict=True):
            os.dup2(write_end, target)
            os.close(write_end)
            os.close(read_end)

    def close_write_ends(self) -> None:
        """In T, once P is forked: only P (and what it forks) may write."""
        for _read_end, write_end in self.pipes:
            with contextlib.suppress(OSError):
                os.close(write_end)

    def relay_until_exit(self, pid: int) -> None:
        """In T: copy what P writes to T's own fds 1 and 2 until P has ended (not reaped)."""
        self.close_write_ends()
        ended = os.pidfd_open(pid)
        try:
            open_ends = {read_end: target for target, (read_end, _) in zip((1, 2), self.pipes,
                                                                           strict=True)}
            while True:
                ready, _, _ = select.select([ended, *open_ends], [], [])
                for fd in ready:
                    if fd in open_ends and not self._copy(fd, open_ends[fd]):
                        del open_ends[fd]  # EOF: every writer closed it
                if ended in ready:
                    return
        finally:
            os.close(ended)

    def drain(self) -> None:
        """In T, once P and its descendants are gone: copy what is left, close the pipes."""
        for target, (read_end, _write_end) in zip((1, 2), self.pipes, strict=True):
            with contextlib.suppress(OSError):
                os.set_blocking(read_end, False)
                while self._copy(read_end, target):
                    pass
            with contextlib.suppress(OSError):
                os.close(read_end)

    @staticmethod
    def _copy(source: int, target: int) -> bool:
        """One chunk from `source` to `target`; False at EOF or nothing left to read."""
        try:
            data = os.read(source, CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            return False
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(target, view):]
            except OSError:  # the run's stdout is gone: the task's output is dropped
                break
        return bool(data)
