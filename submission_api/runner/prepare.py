"""Preparation of one run, on the side that holds the labels (the worker, or `arena run`): the
meta-train and meta-valid views (only what the protocol lets the participant see), written into the
bundle, and the test tasks as index lists into the compiled datasets (the task plan), written into
the answers folder, which never reaches participant code.

A view that holds a whole compiled dataset is hard-linked from the cache (no copy); one that holds
part of it (held-out images, within-domain class splits) is written as a new compiled entry, so
the excluded images are physically absent from what the participant side can read.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from submission_api.data import Collection, CompiledDataset, write_compiled_subset
from submission_api.protocols import (
    ProtocolParams,
    compute_run_test_seed,
    plan_meta_train_view,
    plan_meta_valid_view,
    plan_test_episodes,
)
from submission_api.runner.bundle import AnswerTask, write_task_plan

VIEW_FOLDERS = {"meta-train": "meta_train", "meta-valid": "meta_valid"}


@dataclass(frozen=True)
class PreparedRun:
    """What preparation produced, for progress reports and the run record."""

    bundle_dir: Path
    answers_dir: Path
    tasks: list[AnswerTask]
    meta_train_images: int


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _write_view_dataset(dataset: CompiledDataset, indices: np.ndarray, target: Path) -> None:
    if len(indices) == len(dataset.labels):
        target.mkdir(parents=True)
        for item in dataset.root.iterdir():
            if item.is_file():
                _link_or_copy(item, target / item.name)
    else:
        write_compiled_subset(dataset, np.sort(indices), target, name=dataset.name)


def write_view(collection: Collection, view: dict[str, np.ndarray], target_dir: Path) -> int:
    """Write a view (dataset -> allowed image indices) under `target_dir`; return its size."""
    target_dir.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, indices in sorted(view.items()):
        if len(indices) == 0:
            continue
        _write_view_dataset(collection.datasets[name], np.asarray(indices), target_dir / name)
        total += len(indices)
    return total


def prepare_run(
    collection: Collection,
    protocol: ProtocolParams,
    seed: tuple[int, int],
    bundle_dir: Path,
    answers_dir: Path,
    threads: int = 1,
) -> PreparedRun:
    """Write `bundle_dir` (meta-train side, read-only there) and `answers_dir` (trusted side).

    Args:
        seed: `(test_seed, participant_seed)`. Test tasks depend on the test seed alone (the
            phase's, secret on the platform; under `run_test_tasks: fresh` combined with the
            participant seed, `compute_run_test_seed`); only the participant seed reaches the
            participant side (run.json), which seeds meta-train sampling and participant code.
        threads: CPU threads the participant side may use (pins torch's, so local and platform
            runs compute alike).
    """
    bundle_dir.mkdir(parents=True, exist_ok=True)
    train_images = write_view(
        collection,
        plan_meta_train_view(protocol, collection),
        bundle_dir / VIEW_FOLDERS["meta-train"],
    )
    write_view(
        collection,
        plan_meta_valid_view(protocol, collection),
        bundle_dir / VIEW_FOLDERS["meta-valid"],
    )
    episodes = plan_test_episodes(
        protocol, collection, compute_run_test_seed(protocol, int(seed[0]), int(seed[1])))
    tasks = write_task_plan(episodes, collection.datasets, answers_dir)
    run_info = {
        "participant_seed": int(seed[1]),
        "protocol": protocol.name,
        "threads": threads,
        "n_tasks": len(tasks),
    }
    (bundle_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    return PreparedRun(bundle_dir, answers_dir, tasks, train_images)
