"""What the trusted side of a run keeps about its test tasks: the task plan, written by
`prepare_run` into the answers folder and never shown to participant code.

A task is index lists into the compiled datasets (support and query image indices, their labels),
not pixels: disk written per run does not grow with the number of tasks, and the pixels of task i
exist only in the sealed memory file that carries task i to its own process (`task_server`,
`channel.seal`). Images are read from a compiled dataset with `pread`, in file order, straight
into that file (or, for the scorer and benchmarks, one reusable task-sized buffer), so no page of
a dataset stays mapped in the trusted process and its memory stays flat however many tasks a run
has (docs/performance.md).

Answers folder: `tasks.json` (one `AnswerTask` per task), `datasets.json` (name -> compiled
entry folder), `support_index.npy`, `support_labels.npy`, `query_index.npy`, `query_labels.npy`
(concatenated over tasks; each task names its offsets).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from submission_api.data import CompiledDataset, open_compiled
from submission_api.runner.channel import SealedArrays, seal
from submission_api.sampling import Episode

IMAGE_SHAPE = (128, 128, 3)
PLAN_ARRAYS = ("support_index", "support_labels", "query_index", "query_labels")


@dataclass(frozen=True)
class AnswerTask:
    """What the trusted side keeps about one task."""

    id: int
    dataset: str
    group: str
    n_ways: int
    n_shots: int
    support_offset: int
    n_support: int
    query_offset: int
    n_query: int


class _RowReader:
    """Copies chosen rows of a dataset's images into a caller's buffer, reading a compiled
    dataset's file in ascending row order with `pread` (readahead-friendly on a cold cache;
    nothing stays mapped), and any other array by plain indexing."""

    def __init__(self) -> None:
        self._files: dict[str, int] = {}

    def read(self, images: np.ndarray, indices: np.ndarray, out: np.ndarray) -> None:
        """`out[j] = images[indices[j]]` for every j; `out` is C-contiguous uint8."""
        if len(indices) and (indices.min() < 0 or indices.max() >= len(images)):
            raise IndexError(f"image indices in [{indices.min()}, {indices.max()}] for a dataset "
                             f"of {len(images)} images; the episode does not fit its dataset.")
        fd = self._file_of(images)
        if fd is None or not isinstance(images, np.memmap):  # a file only for a memory map
            np.take(images, indices, axis=0, out=out, mode="clip")  # bounds checked above
            return
        row, start = out[0].nbytes if len(out) else 0, images.offset
        for j in np.argsort(indices, kind="stable").tolist():
            if os.preadv(fd, [out[j]], start + int(indices[j]) * row) != row:
                raise OSError(f"{images.filename}: short read of image {indices[j]}; the "
                              "compiled entry changed while the run was served.")

    def _file_of(self, images: np.ndarray) -> int | None:
        # Only a memory map that owns its mapping has a known file offset (a slice of one
        # reports its parent's), so anything else is indexed in memory.
        if not (isinstance(images, np.memmap) and isinstance(images.base, mmap.mmap)
                and images.filename and images.flags.c_contiguous and hasattr(os, "preadv")
                and images.dtype == np.uint8 and images.shape[1:] == IMAGE_SHAPE):
            return None
        if images.filename not in self._files:
            self._files[images.filename] = os.open(images.filename, os.O_RDONLY)
        return self._files[images.filename]

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


def write_task_plan(episodes: Sequence[Episode], datasets: dict[str, CompiledDataset],
                    answers_dir: Path) -> list[AnswerTask]:
    """Write the run's test tasks as index lists into `answers_dir`; return them.

    Raises:
        KeyError: an episode names a dataset not in `datasets`.
    """
    answers_dir.mkdir(parents=True, exist_ok=True)
    tasks: list[AnswerTask] = []
    parts: dict[str, list[np.ndarray]] = {name: [] for name in PLAN_ARRAYS}
    s_at = q_at = 0
    for task_id, episode in enumerate(episodes):
        size = len(datasets[episode.dataset].labels)
        for name in ("support_idx", "query_idx"):
            index = np.asarray(getattr(episode, name))
            if len(index) and (index.min() < 0 or index.max() >= size):
                raise IndexError(f"task {task_id}: {name} outside dataset {episode.dataset!r} "
                                 f"of {size} images")
        s_n, q_n = len(episode.support_idx), len(episode.query_idx)
        parts["support_index"].append(episode.support_idx)
        parts["support_labels"].append(episode.support_labels)
        parts["query_index"].append(episode.query_idx)
        parts["query_labels"].append(episode.query_labels)
        tasks.append(AnswerTask(task_id, episode.dataset, episode.group, episode.n_ways,
                                episode.n_shots, s_at, s_n, q_at, q_n))
        s_at, q_at = s_at + s_n, q_at + q_n
    for name, chunks in parts.items():
        array = np.concatenate(chunks).astype(np.int64) if chunks else np.zeros(0, np.int64)
        np.save(answers_dir / f"{name}.npy", array)
    (answers_dir / "tasks.json").write_text(json.dumps([asdict(t) for t in tasks]))
    used = sorted({t.dataset for t in tasks})
    (answers_dir / "datasets.json").write_text(
        json.dumps({name: str(datasets[name].root) for name in used}))
    return tasks


@dataclass(frozen=True)
class TaskPlan:
    """The trusted side's view of a run's test tasks (index arrays memory-mapped: flat RSS)."""

    tasks: list[AnswerTask]
    arrays: dict[str, np.ndarray]
    dataset_roots: dict[str, Path]

    def window(self, name: str, task: AnswerTask) -> np.ndarray:
        kind = name.split("_")[0]
        start, count = ((task.support_offset, task.n_support) if kind == "support"
                        else (task.query_offset, task.n_query))
        return np.asarray(self.arrays[name][start : start + count])


def read_task_plan(answers_dir: Path) -> TaskPlan:
    tasks = [AnswerTask(**t) for t in json.loads((answers_dir / "tasks.json").read_text())]
    arrays = {name: np.load(answers_dir / f"{name}.npy", mmap_mode="r") for name in PLAN_ARRAYS}
    roots = {k: Path(v) for k, v in json.loads((answers_dir / "datasets.json").read_text()).items()}
    return TaskPlan(tasks, arrays, roots)


class TaskImages:
    """Cuts one task's images out of the compiled datasets into reusable buffers."""

    def __init__(self, plan: TaskPlan) -> None:
        self.plan = plan
        self.datasets = {name: open_compiled(root, name=name)
                         for name, root in plan.dataset_roots.items()}
        self._buffers: tuple[np.ndarray, np.ndarray] | None = None
        self._reader = _RowReader()

    def cut(self, task: AnswerTask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """uint8 support images `[n_support,128,128,3]`, int64 support labels `[n_support]` and
        uint8 query images `[n_query,128,128,3]` (views of buffers reused by the next call)."""
        if self._buffers is None:
            largest = max((max(t.n_support, t.n_query) for t in self.plan.tasks), default=0)
            self._buffers = (np.empty((largest, *IMAGE_SHAPE), dtype=np.uint8),
                             np.empty((largest, *IMAGE_SHAPE), dtype=np.uint8))
        support = self._buffers[0][: task.n_support]
        query = self._buffers[1][: task.n_query]
        self._fill(task, support, query)
        return support, self.plan.window("support_labels", task), query

    def cut_sealed(self, task: AnswerTask) -> SealedArrays:
        """The same three arrays read straight into a sealed memory file (`channel.seal`), the
        form in which a task reaches its process; the caller closes it."""
        def fill(views: list[np.ndarray]) -> None:
            support, labels, query = views
            self._fill(task, support, query)
            labels[...] = self.plan.window("support_labels", task)

        return seal([(np.dtype(np.uint8), (task.n_support, *IMAGE_SHAPE)),
                     (np.dtype(np.int64), (task.n_support,)),
                     (np.dtype(np.uint8), (task.n_query, *IMAGE_SHAPE))], fill)

    def read_rows(self, dataset: str, indices: np.ndarray, out: np.ndarray) -> None:
        """`out[j]` = image `indices[j]` of `dataset`, uint8 `[128, 128, 3]` (`out` is
        C-contiguous; a row cache's misses, `runner/row_cache.py`)."""
        self._reader.read(self.datasets[dataset].images, indices, out)

    def _fill(self, task: AnswerTask, support: np.ndarray, query: np.ndarray) -> None:
        images = self.datasets[task.dataset].images
        self._reader.read(images, self.plan.window("support_index", task), support)
        self._reader.read(images, self.plan.window("query_index", task), query)

    def close(self) -> None:
        self._reader.close()


def read_answers(answers_dir: Path) -> tuple[list[AnswerTask], np.ndarray]:
    """The scoring side's tasks and query labels."""
    tasks = [AnswerTask(**t) for t in json.loads((answers_dir / "tasks.json").read_text())]
    return tasks, np.load(answers_dir / "query_labels.npy")
