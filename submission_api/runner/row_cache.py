"""The trusted side's float32 rows of a run's test images, each converted once per run rather than
once per task that uses it (issue 38.2).

The tasks of a run draw from a few datasets, so they share most of their images: 300 tasks of the
benchmark's collection hold ~120,000 images, of 1,600 distinct ones. `RowCache` keeps each
image's float32 `[3, 128, 128]` row (`x / 255`, the values `data.images_to_tensor` gives, bit
for bit) in memory of the trusted side's own, least recently used first out, bounded by
`ARENA_ROW_CACHE_MIB`; a task's tensors are then gathered from it into the task's file
(`runner/task_files.py`) with one copy per image, where a cut otherwise reads the image's uint8
row and converts it (about twice a copy's time). A task with more distinct images than the cache
holds is converted as before.

What this changes for isolation: nothing a task can reach. The cache is anonymous memory of the
trusted process, never shared and not inherited by any child (`MADV_DONTFORK`: a process the
trusted side starts never holds it, even between its fork and its exec); a task still receives
only its own file, whose bytes are those of a conversion (what it receives is unchanged, bit for
bit). Which rows it holds depends only on the task plan (the order of the tasks and their
images), never on what a task did, so no task can write into it for another. On the platform it
is the worker's memory, not the sandbox's; it adds at most the bound to the trusted side's peak.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from submission_api.runner.bundle import IMAGE_SHAPE, TaskImages

ROW_SHAPE = (3, *IMAGE_SHAPE[:2])
ROW_BYTES = int(np.prod(ROW_SHAPE)) * 4
CACHE_SETTING = "ARENA_ROW_CACHE_MIB"
DEFAULT_CACHE_MIB = 256.0
"""1,365 rows: more than any task holds (the largest NeurIPS'22 task, 20 ways of 20 shots and 20
queries, is 800 images), beside the task files' ~3 x 80 MiB."""
AVAILABLE_SHARE = 8
"""Unset, the bound is at most this fraction of the memory available when the run starts: a
worker's pool slots each hold a cache in the worker's memory, beside their sandboxes, and a
cache only saves time, so on a small or busy host it shrinks instead of pressing the runs."""


def _available_bytes(meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def row_cache_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """The bound set by `ARENA_ROW_CACHE_MIB` (a number of MiB, 0 to turn the cache off); unset,
    `DEFAULT_CACHE_MIB` or an `AVAILABLE_SHARE`th of the memory available, whichever is less.

    Raises:
        ValueError: the setting is not a number >= 0.
    """
    text = os.environ.get(CACHE_SETTING, "").strip()
    if not text:
        default = int(DEFAULT_CACHE_MIB * 2**20)
        available = _available_bytes(meminfo)
        return default if available is None else min(default, available // AVAILABLE_SHARE)
    try:
        mib = float(text)
    except ValueError:
        mib = float("nan")
    if not mib >= 0:  # NaN too
        raise ValueError(f"{CACHE_SETTING}={text!r}: expected a number of MiB >= 0 (0 turns "
                         "the cache off; unset, the platform picks one)")
    return int(mib * 2**20)


def _distinct_within(indices: np.ndarray, size: int) -> np.ndarray:
    """The distinct `indices`, sorted; IndexError if one is outside a dataset of `size` images."""
    wanted = np.unique(indices)
    if len(wanted) and (wanted[0] < 0 or wanted[-1] >= size):
        raise IndexError(f"image indices in [{wanted[0]}, {wanted[-1]}] for a dataset of "
                         f"{size} images; the episode does not fit its dataset.")
    return wanted


class RowCache:
    """Float32 rows of the images of `images`' datasets, at most `limit_bytes` of them."""

    def __init__(self, images: TaskImages, limit_bytes: int) -> None:
        self.images = images
        self.capacity = max(0, limit_bytes) // ROW_BYTES
        self._map: mmap.mmap | None = None
        self.rows = np.empty((0, *ROW_SHAPE), np.float32)
        if self.capacity:
            self._map = mmap.mmap(-1, self.capacity * ROW_BYTES,
                                  flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self._map.madvise(mmap.MADV_DONTFORK)  # no child ever holds it
            if hasattr(mmap, "MADV_HUGEPAGE"):
                self._map.madvise(mmap.MADV_HUGEPAGE)  # filled once: fewer faults
            self.rows = np.ndarray((self.capacity, *ROW_SHAPE), np.float32, buffer=self._map)
        self._names = sorted(images.datasets)
        self._slot_of = {name: np.full(len(images.datasets[name].images), -1, np.int64)
                         for name in self._names}
        """Per dataset: image index -> its row's slot, or -1."""
        self._owner = np.full((self.capacity, 2), -1, np.int64)
        """Per slot: (dataset number in `_names`, image index)."""
        self._stamp = np.full(self.capacity, -1, np.int64)
        """Per slot: the last gather that used it."""
        self._used = 0
        """Slots filled so far (the first `_used`: a slot is never emptied, only reused)."""
        self._tick = 0
        self._scratch = np.empty((0, *IMAGE_SHAPE), np.uint8)
        self.hits = self.misses = 0

    def gather(self, dataset: str, parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> bool:
        """`out[j] = x / 255` in `[3, 128, 128]` float32 for the uint8 image `indices[j]` of
        `dataset`, for each `(indices, out)` in `parts`; False, nothing written, when their
        distinct images are more than the cache holds (the caller converts them itself).

        Raises:
            IndexError: an index outside the dataset.
            OSError: the dataset's file could not be read.
        """
        slot_of = self._slot_of[dataset]
        wanted = _distinct_within(np.concatenate([np.asarray(i, np.int64) for i, _ in parts]),
                                  len(slot_of))
        if len(wanted) > self.capacity:
            return False
        self._tick += 1
        slots = slot_of[wanted]
        self._stamp[slots[slots >= 0]] = self._tick  # this gather's rows stay
        missing = wanted[slots < 0]
        if len(missing):
            self._fill(dataset, missing)
        self.hits += len(wanted) - len(missing)
        self.misses += len(missing)
        for indices, out in parts:
            np.take(self.rows, slot_of[np.asarray(indices, np.int64)], axis=0, out=out,
                    mode="clip")  # every index has its slot now
        return True

    def warm(self, dataset: str, indices: np.ndarray) -> bool:
        """Convert the images `indices` of `dataset` that are not cached yet, into free slots
        only; False, nothing done, when they do not all fit there (the cache is then as full as
        warming in plan order makes it: rows needed sooner are never evicted for later ones).

        Raises:
            IndexError: an index outside the dataset.
            OSError: the dataset's file could not be read.
        """
        slot_of = self._slot_of[dataset]
        wanted = _distinct_within(np.asarray(indices, np.int64), len(slot_of))
        missing = wanted[slot_of[wanted] < 0]
        if len(missing) > self.capacity - self._used:
            return False
        self._tick += 1
        self._stamp[slot_of[wanted[slot_of[wanted] >= 0]]] = self._tick
        if len(missing):
            self._fill(dataset, missing)
        return True

    @property
    def full(self) -> bool:
        return self._used >= self.capacity

    def _fill(self, dataset: str, missing: np.ndarray) -> None:
        """Convert `missing` (sorted, none cached) into free slots or the least recently used
        ones no row of this gather is in."""
        fresh = min(len(missing), self.capacity - self._used)
        slots = np.arange(self._used, self._used + fresh)
        self._used += fresh
        self._stamp[slots] = self._tick
        if fresh < len(missing):
            # Every slot is in use now; this gather's hold the current tick, the largest stamp,
            # and leave at least len(missing) - fresh others (len(wanted) <= capacity).
            victims = np.argpartition(self._stamp, len(missing) - fresh - 1)[
                : len(missing) - fresh]
            owners = self._owner[victims]
            for number in np.unique(owners[:, 0]).tolist():
                if number >= 0:  # (a slot whose read failed has none)
                    self._slot_of[self._names[number]][owners[owners[:, 0] == number, 1]] = -1
            self._owner[victims] = -1
            slots = np.concatenate([slots, np.sort(victims)])
            self._stamp[slots] = self._tick
        if len(self._scratch) < len(missing):
            self._scratch = np.empty((len(missing), *IMAGE_SHAPE), np.uint8)
        scratch = self._scratch[: len(missing)]
        try:
            self.images.read_rows(dataset, missing, scratch)
            rows = self.rows
            for row, slot in zip(scratch, slots.tolist(), strict=True):
                np.divide(row.transpose(2, 0, 1), np.float32(255), out=rows[slot],
                          dtype=np.float32)
        except BaseException:
            self._stamp[slots] = -1  # free, first to be taken again; no image names them
            raise
        # Named only once converted: a failed read leaves no image pointing at a row it lacks.
        self._slot_of[dataset][missing] = slots
        self._owner[slots, 0] = self._names.index(dataset)
        self._owner[slots, 1] = missing

    def close(self) -> None:
        self.rows = np.empty((0, *ROW_SHAPE), np.float32)
        if self._map is not None:
            self._map.close()
            self._map = None
