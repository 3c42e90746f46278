"""NeurIPS'22 zips that rely on the kit's generator contract run unchanged under `arena run`:
`validation_datasets: 0` (the kit then has no meta-valid generator), a meta-valid generator
called twice (the kit restarts it from its seed: the same tasks each call), `train_classes`
None when N is null, and `min_N: 1`."""

from __future__ import annotations

import json
from pathlib import Path

from submission_api.protocols import ProtocolParams
from submission_api.runner.local import run_local

MODEL = """
import numpy as np, torch
from submission_api.api import MetaLearner, Learner, Predictor

class MyPredictor(Predictor):
    def predict(self, query_set):
        return np.zeros(len(query_set), dtype=int)

class MyLearner(Learner):
    def fit(self, support_set):
        return MyPredictor()
    def save(self, path):
        open(path + "/weights.txt", "w").write("none")
    def load(self, path):
        pass

def digest(tasks):
    return [(t.num_ways, t.num_shots, float(t.support_set[0].sum()), float(t.query_set[0].sum()))
            for t in tasks]

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        for task in meta_train_generator(3):
            pass
BODY
        return MyLearner()
"""

NO_VALID = """
        assert meta_valid_generator is None, meta_valid_generator
"""
VALID_TWICE = """
        assert self.train_classes is None, self.train_classes
        first, second = digest(meta_valid_generator(3)), digest(meta_valid_generator(3))
        assert first == second, (first, second)
"""


def _run(tmp_path: Path, collection: Path, cache: Path, config: dict, body: str):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "model.py").write_text(MODEL.replace("BODY", body))
    (sub / "config.json").write_text(json.dumps(config))
    protocol = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 2})
    return run_local(sub, collection, tmp_path / "out", protocol=protocol, cache_dir=cache)


def test_validation_datasets_0_runs_without_a_meta_valid_generator(
        tmp_path, tiny_collection, arena_cache):
    result = _run(tmp_path, tiny_collection, arena_cache, {"validation_datasets": 0}, NO_VALID)
    assert result.state == "finished", result.message


def test_a_meta_valid_generator_called_twice_gives_the_same_tasks(
        tmp_path, tiny_collection, arena_cache):
    config = {"validation_datasets": 1,
              "train_config": {"N": None, "min_N": 1, "max_N": 3, "query_images_per_class": 5}}
    result = _run(tmp_path, tiny_collection, arena_cache, config, VALID_TWICE)
    assert result.state == "finished", result.message
