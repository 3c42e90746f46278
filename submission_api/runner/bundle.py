"""The file contract between the two sides of a run (docs/internals.md): the meta-test bundle the
participant side reads (support images and labels, query images — never query labels, dataset or
class names) and the answers only the scoring side holds.

Images are stored once, uint8 `[n, 128, 128, 3]`, concatenated over tasks; each task names its
offsets. Writing streams task by task through one reusable task-sized buffer, so the writer's
memory stays flat however many tasks a run has and however large its datasets are
(docs/performance.md): rows of a compiled dataset are read with `pread` in file order (no pages of
the dataset stay mapped into the process) and appended with plain file writes (no page of the
bundle is mapped either; a written memory map would count every bundle page in the writer's
resident set until it is closed).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from submission_api.data import CompiledDataset
from submission_api.sampling import Episode

IMAGE_SHAPE = (128, 128, 3)
META_TEST = "meta_test"


@dataclass(frozen=True)
class BundleTask:
    """Where one test task's arrays lie in the bundle; all the participant side learns of it."""

    id: int
    n_ways: int
    n_shots: int
    n_support: int
    n_query: int
    support_offset: int
    query_offset: int


@dataclass(frozen=True)
class AnswerTask:
    """What the scoring side keeps about one task."""

    id: int
    dataset: str
    group: str
    n_ways: int
    n_shots: int
    query_offset: int
    n_query: int


def _open_images(path: Path, count: int, mode: str) -> np.ndarray:
    if count == 0:
        return np.zeros((0, *IMAGE_SHAPE), dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode=mode, shape=(count, *IMAGE_SHAPE))


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
        if fd is None:
            np.take(images, indices, axis=0, out=out, mode="clip")  # bounds checked above
            return
        row, start = out[0].nbytes if len(out) else 0, images.offset
        for j in np.argsort(indices, kind="stable").tolist():
            if os.preadv(fd, [out[j]], start + int(indices[j]) * row) != row:
                raise OSError(f"{images.filename}: short read of image {indices[j]}; the "
                              "compiled entry changed while the bundle was written.")

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


def write_meta_test(
    episodes: Sequence[Episode],
    datasets: dict[str, CompiledDataset],
    bundle_dir: Path,
    answers_dir: Path,
) -> list[BundleTask]:
    """Write the meta-test part of a bundle and the matching answers.

    Raises:
        KeyError: an episode names a dataset not in `datasets`.
    """
    test_dir = bundle_dir / META_TEST
    test_dir.mkdir(parents=True, exist_ok=True)
    answers_dir.mkdir(parents=True, exist_ok=True)
    n_support = sum(len(e.support_idx) for e in episodes)
    n_query = sum(len(e.query_idx) for e in episodes)
    largest = max((max(len(e.support_idx), len(e.query_idx)) for e in episodes), default=0)
    buffer = np.empty((largest, *IMAGE_SHAPE), dtype=np.uint8)
    support_labels = np.empty(n_support, dtype=np.int64)
    query_labels = np.empty(n_query, dtype=np.int64)
    tasks, answers, s_at, q_at = [], [], 0, 0
    reader = _RowReader()
    try:
        with open(test_dir / "support_images.u8", "wb") as support, \
                open(test_dir / "query_images.u8", "wb") as query:
            for task_id, episode in enumerate(episodes):
                images = datasets[episode.dataset].images
                s_n, q_n = len(episode.support_idx), len(episode.query_idx)
                for indices, target in ((episode.support_idx, support),
                                        (episode.query_idx, query)):
                    rows = buffer[: len(indices)]
                    reader.read(images, np.asarray(indices, dtype=np.int64), rows)
                    target.write(memoryview(rows).cast("B"))
                support_labels[s_at : s_at + s_n] = episode.support_labels
                query_labels[q_at : q_at + q_n] = episode.query_labels
                tasks.append(
                    BundleTask(task_id, episode.n_ways, episode.n_shots, s_n, q_n, s_at, q_at)
                )
                answers.append(
                    AnswerTask(task_id, episode.dataset, episode.group, episode.n_ways,
                               episode.n_shots, q_at, q_n)
                )
                s_at, q_at = s_at + s_n, q_at + q_n
    finally:
        reader.close()
    np.save(test_dir / "support_labels.npy", support_labels)
    (test_dir / "tasks.json").write_text(json.dumps([asdict(t) for t in tasks]))
    np.save(answers_dir / "query_labels.npy", query_labels)
    (answers_dir / "tasks.json").write_text(json.dumps([asdict(a) for a in answers]))
    return tasks


@dataclass(frozen=True)
class MetaTestBundle:
    """The participant side's read-only view of the meta-test tasks."""

    tasks: list[BundleTask]
    support_images: np.ndarray
    support_labels: np.ndarray
    query_images: np.ndarray

    def support(self, task: BundleTask) -> tuple[np.ndarray, np.ndarray]:
        """uint8 images `[n_support, 128, 128, 3]` and int64 labels `[n_support]`."""
        window = slice(task.support_offset, task.support_offset + task.n_support)
        return self.support_images[window], self.support_labels[window]

    def query(self, task: BundleTask) -> np.ndarray:
        """uint8 images `[n_query, 128, 128, 3]`."""
        return self.query_images[task.query_offset : task.query_offset + task.n_query]


def read_meta_test(bundle_dir: Path) -> MetaTestBundle:
    """Open the meta-test part of a bundle (memory maps; nothing loaded up front)."""
    test_dir = bundle_dir / META_TEST
    tasks = [BundleTask(**t) for t in json.loads((test_dir / "tasks.json").read_text())]
    n_support = sum(t.n_support for t in tasks)
    n_query = sum(t.n_query for t in tasks)
    return MetaTestBundle(
        tasks=tasks,
        support_images=_open_images(test_dir / "support_images.u8", n_support, "r"),
        support_labels=np.load(test_dir / "support_labels.npy"),
        query_images=_open_images(test_dir / "query_images.u8", n_query, "r"),
    )


def read_answers(answers_dir: Path) -> tuple[list[AnswerTask], np.ndarray]:
    """The scoring side's tasks and query labels."""
    tasks = [AnswerTask(**t) for t in json.loads((answers_dir / "tasks.json").read_text())]
    return tasks, np.load(answers_dir / "query_labels.npy")
