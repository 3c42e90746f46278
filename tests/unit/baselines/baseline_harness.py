"""Test harness for the baselines, a tiny stand-in for the runner: synthetic tasks and
batches, a recording logger, and a loader that imports a baseline's model.py the way the runner
does (from its folder, under a fresh module name). The tests' conftest sets
ARENA_BASELINE_QUICK=1 so that meta-training takes a few seconds.

Each synthetic class is a colour: images are that colour plus pixel noise, so classes are
separable and a working few-shot learner must beat chance by far.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from submission_api.task import Task

BASELINES_DIR = Path(__file__).resolve().parents[3] / "starting_kit" / "baselines"
BASELINES = ("random", "scratch", "finetune", "protonet", "matchingnet", "fomaml")
IMAGE_SIZE = 128
_module_counter = itertools.count()


class RecordingLogger:
    """Has the runner logger's `log` signature; keeps every call for assertions."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, np.ndarray, float | None, bool]] = []

    def log(self, data, predictions, loss=None, meta_train=True) -> None:
        self.calls.append((data, predictions, loss, meta_train))


class SyntheticWorld:
    """Classes are colours; `n_classes` of them, drawn once from `seed`."""

    def __init__(self, n_classes: int, seed: int, noise: float = 0.15) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.colours = torch.rand(n_classes, 3, generator=generator) * 0.7 + 0.15
        self.noise = noise
        self.generator = generator
        self.n_classes = n_classes

    def images(self, class_id: int, n: int) -> torch.Tensor:
        """float32 `[n, 3, 128, 128]` in [0, 1]."""
        noise = torch.randn(n, 3, IMAGE_SIZE, IMAGE_SIZE, generator=self.generator) * self.noise
        return (self.colours[class_id].view(1, 3, 1, 1) + noise).clamp(0, 1)

    def labelled(self, class_ids: list[int], per_class: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([self.images(c, per_class) for c in class_ids])
        y = torch.arange(len(class_ids)).repeat_interleave(per_class)
        return x, y

    def task(self, n_ways: int, n_shots: int, n_queries: int) -> Task:
        perm = torch.randperm(self.n_classes, generator=self.generator)[:n_ways].tolist()
        support_x, support_y = self.labelled(perm, n_shots)
        query_x, query_y = self.labelled(perm, n_queries)
        original = torch.tensor(perm)
        return Task(
            num_ways=n_ways,
            num_shots=n_shots,
            support_set=(support_x, support_y, original[support_y]),
            query_set=(query_x, query_y, original[query_y]),
            original_class_idx=np.array(perm),
            dataset="synthetic",
        )

    def batch(self, batch_size: int) -> list[torch.Tensor]:
        """`[X, y]` with y global class ids in `0..n_classes-1`."""
        y = torch.randint(0, self.n_classes, (batch_size,), generator=self.generator)
        x = torch.cat([self.images(int(c), 1) for c in y])
        return [x, y]

    def generator_for(self, config: dict, n_ways: int = 5) -> Callable[[int], Iterator]:
        """A `meta_train_generator` in the format config.json asks for (small sizes)."""
        if config.get("train_data_format", "task") == "batch":
            return lambda n: (self.batch(8) for _ in range(n))
        return lambda n: (self.task(n_ways, 2, 3) for _ in range(n))


def load_baseline(name: str) -> ModuleType:
    """Import `starting_kit/baselines/<name>/model.py` as a fresh module."""
    path = BASELINES_DIR / name / "model.py"
    module_name = f"_baseline_{name}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_config(name: str) -> dict:
    return json.loads((BASELINES_DIR / name / "config.json").read_text())


def compute_normalized_accuracy(predictions: np.ndarray, truth: np.ndarray, n_ways: int) -> float:
    """Balanced accuracy over `0..n_ways-1`, rescaled so that chance is 0 and perfect is 1."""
    labels = predictions.argmax(1) if predictions.ndim == 2 else predictions
    recalls = [np.mean(labels[truth == c] == c) for c in range(n_ways)]
    return (float(np.mean(recalls)) - 1 / n_ways) / (1 - 1 / n_ways)


class Outcome:
    """What one meta-train, save, load, fit, predict cycle produced."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.learner_type: type | None = None
        self.logger = RecordingLogger()
        self.predictions: list[np.ndarray] = []
        self.truths: list[np.ndarray] = []
        self.ways: list[int] = []

    def normalized_accuracy(self) -> float:
        scores = [
            compute_normalized_accuracy(p, t, n)
            for p, t, n in zip(self.predictions, self.truths, self.ways, strict=True)
        ]
        return float(np.mean(scores))


TEST_TASKS = ((2, 1, 6), (5, 5, 6), (7, 3, 4), (5, 5, 6), (20, 2, 2))
"""(n_ways, n_shots, n_queries) of the meta-test tasks: variable ways and shots, like the
cross-domain protocol."""


def run_lifecycle(
    name: str, save_dir: Path, seed: int = 0, with_validation: bool = False
) -> Outcome:
    """Seed, import, meta-train on synthetic data (with a meta-valid generator of 3-way tasks if
    asked), save; then, per test task, a fresh MyLearner from a freshly imported model.py (as in
    a new process), load, fit, predict."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    outcome = Outcome(name)
    module = load_baseline(name)
    config = load_config(name)
    train_world = SyntheticWorld(n_classes=12, seed=seed + 1)
    batch_mode = config.get("train_data_format") == "batch"
    meta_learner = module.MyMetaLearner(12 if batch_mode else 5, 12, outcome.logger)
    valid_world = SyntheticWorld(n_classes=6, seed=seed + 3)
    valid_generator = valid_world.generator_for({}, n_ways=3) if with_validation else None
    learner = meta_learner.meta_fit(train_world.generator_for(config), valid_generator)
    outcome.learner_type = type(learner)
    save_dir.mkdir(parents=True, exist_ok=True)
    learner.save(str(save_dir))

    fresh_module = load_baseline(name)
    test_world = SyntheticWorld(n_classes=24, seed=seed + 2)
    for n_ways, n_shots, n_queries in TEST_TASKS:
        task = test_world.task(n_ways, n_shots, n_queries)
        support_x, support_y, _ = task.support_set
        fresh = fresh_module.MyLearner()
        fresh.load(str(save_dir))
        predictor = fresh.fit((support_x, support_y, support_y, n_ways, n_shots))
        outcome.predictions.append(predictor.predict(task.query_set[0]))
        outcome.truths.append(task.query_set[1].numpy())
        outcome.ways.append(n_ways)
    return outcome
