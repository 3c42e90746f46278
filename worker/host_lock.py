"""A run of a secret phase runs alone on its worker host (issue 34).

The page cache and the dentry cache are the host's: a run can leave bits in which pages of the
image are resident or which names were looked up, and a run overlapping it in another slot of
the same host reads them while both run. Resetting the dentry cache and pre-faulting the image
before each run (worker/dentry_reset.py, worker/prefault.py) separates runs that follow each
other, never runs that overlap. So every run holds a host-wide lock from just before its reset
and pre-fault to its end: shared for an ordinary run, exclusive for a run the server marks
`exclusive_host` (its phase's test data are secret). A secret run therefore starts only once
the host's other slots are idle, and no other slot starts a run until it ends.

The lock is two `flock`ed files in the worker's data folder (`host.lock` and `host.lock.gate`;
ARENA_WORKER_HOST_LOCK names another path, for several workers on one host). The gate gives a
waiting exclusive run priority: it holds the gate while it waits, so ordinary runs arriving
meanwhile queue behind it instead of starving it. Each acquisition opens its own file
descriptions (flock locks belong to them, so slot processes never share one by a fork), and
polls, so a lost lease (the heartbeat's cancel event) or a stop ends the wait.

A slot killed mid-run lets go of the lock (its flock dies with its process) while its sandbox
container runs on under the Docker daemon, which nobody then times. Once an exclusive hold is
taken no live run holds the lock, so whatever sandbox of this worker still runs is such an
orphan: `on_exclusive` (the worker's: `wiring.build_host_lock`) removes it before the run starts.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)
POLL_S = 0.2


@dataclass(frozen=True)
class HostHold:
    """What a run held: exclusive or shared, after how long a wait, among how many slots."""

    exclusive: bool
    waited_s: float
    slots: int

    @property
    def line(self) -> str:
        """The run's isolation line's part."""
        if self.exclusive:
            return (f"exclusive host: no other run on this host from its pre-fault to its end "
                    f"(waited {self.waited_s:.1f} s for the other slots)")
        if self.slots > 1:
            return (f"shared host: up to {self.slots - 1} other run(s) of this worker at once "
                    "(not a secret phase)")
        return "one slot on this host"


class HostLock:
    """The host-wide lock at `path` for a worker of `slots` slots."""

    def __init__(self, path: Path, slots: int = 1, poll_s: float = POLL_S,
                 on_exclusive: Callable[[], object] | None = None) -> None:
        self.path, self.slots, self.poll_s = path, slots, poll_s
        self.gate = path.with_name(path.name + ".gate")
        self.on_exclusive = on_exclusive
        """Called once an exclusive hold is taken, before its body: what killed slots left."""

    @contextmanager
    def hold(self, exclusive: bool,
             cancel: threading.Event | None = None) -> Iterator[HostHold | None]:
        """Hold the host (exclusively or shared) for the body; yields None, holding nothing,
        when `cancel` was set while it waited (the run was taken away)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        with ExitStack() as held:
            gate = held.enter_context(_open(self.gate))
            if not self._take(gate, mode, cancel):
                yield None
                return
            host = held.enter_context(_open(self.path))
            if not self._take(host, mode, cancel):
                yield None
                return
            if exclusive and self.on_exclusive is not None:
                self.on_exclusive()  # no live run holds the host: what still runs is orphaned
            fcntl.flock(gate, fcntl.LOCK_UN)  # the host is ours: later arrivals may queue
            hold = HostHold(exclusive, time.monotonic() - began, self.slots)
            log.info("run.host_lock", extra={"exclusive": exclusive,
                                             "waited_s": round(hold.waited_s, 2)})
            yield hold

    def _take(self, handle: IO[bytes], mode: int, cancel: threading.Event | None) -> bool:
        """Poll for the lock; False once `cancel` is set first."""
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            if cancel is not None and cancel.wait(self.poll_s):
                return False
            if cancel is None:
                time.sleep(self.poll_s)


@contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """The lock file, opened afresh (its own open file description), closed on exit."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    handle = os.fdopen(fd, "r+b")
    try:
        yield handle
    finally:
        handle.close()

