"""Random baseline: uniform random labels, the sanity floor (normalized accuracy about 0).

It does not meta-train, and its saved learner is an empty marker file. Predictions come from
torch's global generator, which the runner seeds before importing the submission.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from submission_api.api import Learner, MetaLearner, Predictor

MARKER_FILE = "random_learner.txt"


class MyMetaLearner(MetaLearner):
    """Skips meta-training: there is nothing to learn."""

    def meta_fit(self, meta_train_generator, meta_valid_generator) -> Learner:
        return MyLearner()


class MyLearner(Learner):
    """Remembers only the number of ways of the task."""

    def fit(self, support_set) -> Predictor:
        n_ways = support_set[3]
        return MyPredictor(n_ways)

    def save(self, path_to_save: str) -> None:
        with open(os.path.join(path_to_save, MARKER_FILE), "w") as f:
            f.write("random baseline: nothing to save\n")

    def load(self, path_to_load: str) -> None:
        pass


class MyPredictor(Predictor):
    """Draws one label per query, uniformly in `0..n_ways-1`."""

    def __init__(self, n_ways: int) -> None:
        super().__init__()
        self.n_ways = n_ways

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Returns labels `[n_query]`."""
        return torch.randint(0, self.n_ways, (len(query_set),)).numpy()
