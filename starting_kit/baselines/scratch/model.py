"""Train-from-scratch baseline: no meta-learning at all. For every test task a small network is
initialized at random and trained on the support set alone, the "no transfer" reference point
of few-shot studies (e.g. Chen et al., "A Closer Look at Few-shot Classification", ICLR 2019).

Images are average-pooled to 16x16 once per task and the network is a three-block Conv4 of width
16, so that the per-task training stays within a second or so on one CPU core.

Set the environment variable ARENA_BASELINE_QUICK=1 to shrink the per-task training (used by the
unit tests).
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.backbones import Conv4, downsample

QUICK = os.environ.get("ARENA_BASELINE_QUICK") == "1"
TRAIN_STEPS = 25 if QUICK else 40
LEARNING_RATE = 1e-2
DOWNSAMPLE_FACTOR = 8
MARKER_FILE = "scratch_learner.txt"


def build_network(n_ways: int) -> nn.Sequential:
    """A randomly initialized Conv4 (3 blocks, width 16, 16x16 input) with an `n_ways` head."""
    backbone = Conv4(width=16, depth=3, downsample_factor=1, image_size=128 // DOWNSAMPLE_FACTOR)
    return nn.Sequential(backbone, nn.Linear(backbone.out_features, n_ways))


class MyMetaLearner(MetaLearner):
    """Skips meta-training: the meta-train generator is never read."""

    def meta_fit(self, meta_train_generator, meta_valid_generator) -> Learner:
        return MyLearner()


class MyLearner(Learner):
    """Trains a fresh network on each support set (full batch, Adam)."""

    def fit(self, support_set) -> Predictor:
        support_x, support_y, _, n_ways, _ = support_set
        network = build_network(n_ways)
        optimizer = torch.optim.Adam(network.parameters(), lr=LEARNING_RATE)
        inputs = downsample(support_x, DOWNSAMPLE_FACTOR)
        network.train()
        for _ in range(TRAIN_STEPS):
            loss = F.cross_entropy(network(inputs), support_y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        network.eval()
        return MyPredictor(network)

    def save(self, path_to_save: str) -> None:
        with open(os.path.join(path_to_save, MARKER_FILE), "w") as f:
            f.write("scratch baseline: nothing is learned before the test tasks\n")

    def load(self, path_to_load: str) -> None:
        pass


class MyPredictor(Predictor):
    """Scores queries with the network trained on the support set."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Returns logits `[n_query, n_ways]`."""
        with torch.no_grad():
            return self.network(downsample(query_set, DOWNSAMPLE_FACTOR)).numpy()
