"""A run's predictions depend on its seed and each task's own images only (issue 38): with the next
task started ahead (its images converted before its release, its module imported after), every
task's predictions are bitwise those of the same learner given the same task in one plain
process, seeded as the platform seeds that task. A task handed another task's images, or seeded
after a different amount of our own randomness, would differ."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

from submission_api.data import images_to_tensor
from submission_api.protocols import ProtocolParams
from submission_api.runner.bundle import TaskImages, read_task_plan
from submission_api.runner.local import run_local
from submission_api.runner.stages import compute_task_seed, read_run_info
from submission_api.runner.task_process import seed_task

SIX_TASKS = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 3})
SEEDED_MODEL = """
import random
import numpy as np, torch
from submission_api.api import MetaLearner, Learner, Predictor

class MyPredictor(Predictor):
    def __init__(self, mean, n_ways):
        self.mean, self.n_ways = mean, n_ways
    def predict(self, query_set):
        pixels = query_set.mean((1, 2, 3))[:, None] - self.mean
        noise = torch.rand(len(query_set), self.n_ways) + np.random.rand() + random.random()
        return (pixels + noise).numpy()

class MyLearner(Learner):
    def fit(self, support_set):
        x, _, _, n_ways, _ = support_set
        return MyPredictor(x.mean() + torch.rand(()), n_ways)
    def save(self, path):
        open(path + "/weights.txt", "w").write("none")
    def load(self, path):
        assert open(path + "/weights.txt").read() == "none"

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
"""


def _in_one_process(submission: Path, work: Path, saved: Path) -> list[np.ndarray]:
    spec = importlib.util.spec_from_file_location("seeded_model", submission / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seed = compute_task_seed(read_run_info(work / "bundle"))
    plan = read_task_plan(work / "answers")
    images = TaskImages(plan)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the run's task processes (threads=1)
    try:
        predictions = []
        for task in plan.tasks:
            support, labels, query = images.cut(task)
            seed_task(seed, task.id)
            learner = module.MyLearner()
            learner.load(str(saved))
            y = torch.from_numpy(np.array(labels, dtype=np.int64))
            predictor = learner.fit((images_to_tensor(support), y, y.clone(), task.n_ways,
                                     task.n_shots))
            predictions.append(np.asarray(predictor.predict(images_to_tensor(query))))
        return predictions
    finally:
        torch.set_num_threads(threads)
        images.close()


def test_every_task_predicts_as_the_same_learner_does_on_that_task_in_one_process(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "model.py").write_text(SEEDED_MODEL)
    out = tmp_path / "out"
    result = run_local(submission, tiny_collection, out, protocol=SIX_TASKS, seed=7,
                       cache_dir=arena_cache, keep_work=True, time_limit_s=600)
    assert result.state == "finished", result.message

    expected = _in_one_process(submission, out / ".work", out / "learner")
    got = [np.load(out / "predictions" / f"task_{i:05d}.npy") for i in range(len(expected))]
    assert len(expected) >= 6
    for task_id, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), task_id
    # and the tasks differ from each other: a task given another's images would show
    assert len({p.tobytes() for p in got}) == len(got)
