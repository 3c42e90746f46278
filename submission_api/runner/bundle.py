"""The file contract between the two sides of a run (docs/internals.md): the meta-test bundle the
participant side reads (support images and labels, query images — never query labels, dataset or
class names) and the answers only the scoring side holds.

Images are stored once, uint8 `[n, 128, 128, 3]`, concatenated over tasks; each task names its
offsets. Writing streams task by task into a preallocated file, so memory stays flat however many
tasks a run has.
"""

from __future__ import annotations

import json
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


def _gather(images: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Rows of a memory map in the given order, reading them in file order for locality."""
    order = np.argsort(indices, kind="stable")
    rows = np.empty((len(indices), *IMAGE_SHAPE), dtype=np.uint8)
    rows[order] = images[indices[order]]
    return rows


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
    support = _open_images(test_dir / "support_images.u8", n_support, "w+")
    query = _open_images(test_dir / "query_images.u8", n_query, "w+")
    support_labels = np.empty(n_support, dtype=np.int64)
    query_labels = np.empty(n_query, dtype=np.int64)
    tasks, answers, s_at, q_at = [], [], 0, 0
    for task_id, episode in enumerate(episodes):
        images = datasets[episode.dataset].images
        s_n, q_n = len(episode.support_idx), len(episode.query_idx)
        support[s_at : s_at + s_n] = _gather(images, episode.support_idx)
        query[q_at : q_at + q_n] = _gather(images, episode.query_idx)
        support_labels[s_at : s_at + s_n] = episode.support_labels
        query_labels[q_at : q_at + q_n] = episode.query_labels
        tasks.append(BundleTask(task_id, episode.n_ways, episode.n_shots, s_n, q_n, s_at, q_at))
        answers.append(
            AnswerTask(
                task_id, episode.dataset, episode.group, episode.n_ways, episode.n_shots, q_at, q_n
            )
        )
        s_at, q_at = s_at + s_n, q_at + q_n
    for array in (support, query):
        if isinstance(array, np.memmap):
            array.flush()
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
