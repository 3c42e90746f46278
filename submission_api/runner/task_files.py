"""Memory files the trusted side reuses from test task to test task, each holding one task's
tensors ready to use (issue 38: a task's float32 images, written by us, so its process converts
nothing and faults in no fresh memory for them).

A new process's memory is new pages, which the kernel zeroes before the process may touch them:
converting a task's ~20 MiB of uint8 images into ~80 MiB of float32 in the task's own process
cost more in that zeroing than in the conversion itself, and freeing them again at its exit. A
file written for each task afresh costs the same (its pages are as new). So the trusted side
keeps a few files (`TaskFiles`, one per task in flight: the running one, the next one, the one
being cut) and writes each task's tensors into one whose previous task has ended and whose
processes are gone; the task's process maps it copy-on-write (`channel.receive_sealed(...,
writable=True)`): its tensors are writable, and what it writes stays in its own pages.

Each file is sealed once, when made, against writes by any other holder (`F_SEAL_FUTURE_WRITE`:
no `write` and no new writable shared mapping; only the trusted side's mapping made before the
seal writes), against growing, shrinking and further sealing. A task's process can change
nothing in it for a later task, and holds it only while it lives: the file is written again
only once the supervisor has reported that task's processes gone and swept (`release`). What a
larger task wrote beyond a smaller one's end is zeroed, so no task reads another's images.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from submission_api.runner.channel import REUSED_SEALS, SealedArrays, layout_of

Specs = Sequence[tuple[np.dtype | type, tuple[int, ...]]]


class TaskFile:
    """One reusable file of `size` bytes and the trusted side's writable mapping of it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        """Bytes the last task's arrays reached: zeroed past the next task's end."""
        self.fd = os.memfd_create("arena-task", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, size)
            self._map = mmap.mmap(self.fd, size) if size else None
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, REUSED_SEALS)
        except BaseException:
            os.close(self.fd)
            raise

    def write(self, specs: Specs, fill: Callable[[list[np.ndarray]], None]) -> SealedArrays:
        """Arrays of these dtypes and shapes, written by `fill`; a new descriptor of the file
        (the caller closes it) with their layout."""
        layout, end = layout_of(specs)
        if end > self.size:
            raise ValueError(f"a task of {end} bytes does not fit a file of {self.size}")
        if self._map is not None:
            views = [np.ndarray(tuple(e["shape"]), dtype=np.dtype(e["dtype"]), buffer=self._map,
                                offset=e["offset"]) for e in layout]
            before, self.used = self.used, max(self.used, end)  # a failed fill wrote up to end
            fill(views)
            # what an earlier task left in the alignment gaps and past this one's end
            at = 0
            for view, entry in zip(views, layout, strict=True):
                self._zero(at, entry["offset"])
                at = entry["offset"] + view.nbytes
            self._zero(at, max(before, at))
        self.used = end
        return SealedArrays(os.dup(self.fd), self.size, layout)

    def _zero(self, start: int, stop: int) -> None:
        if self._map is not None and stop > start:
            np.frombuffer(self._map, np.uint8, stop - start, start)[...] = 0

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        os.close(self.fd)


class TaskFiles:
    """The trusted side's reusable task files: each held by one task from its writing until
    `release` (its processes gone), then written for another."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[TaskFile] = []
        self._held: dict[int, TaskFile] = {}
        self._lock = threading.Lock()

    def write(self, task_id: int, specs: Specs,
              fill: Callable[[list[np.ndarray]], None]) -> SealedArrays:
        """`task_id`'s arrays in a file no live task holds (made when none is free)."""
        with self._lock:
            file = self._free.pop() if self._free else None
        file = file or TaskFile(self.size)
        try:
            sealed = file.write(specs, fill)
        except BaseException:
            with self._lock:
                self._free.append(file)
            raise
        with self._lock:
            previous = self._held.pop(task_id, None)
            if previous is not None:
                self._free.append(previous)
            self._held[task_id] = file
        return sealed

    def release(self, task_id: int) -> None:
        """`task_id` has ended and its processes are gone: its file may be written again."""
        with self._lock:
            file = self._held.pop(task_id, None)
            if file is not None:
                self._free.append(file)

    def close(self) -> None:
        """Unmap and close every file (a task's process still alive keeps only its mapping)."""
        with self._lock:
            files, self._free, self._held = [*self._free, *self._held.values()], [], {}
        for file in files:
            file.close()
