"""Fine-tuning baseline ("Baseline" of Chen, Liu, Kira, Wang and Huang, "A Closer Look at
Few-shot Classification", ICLR 2019).

Meta-training is plain supervised pre-training: batches of meta-train images with their global
class ids train a Conv4 and a linear layer over all `total_classes`. At meta-test the backbone is
frozen, that layer is dropped, and a new linear layer with `n_ways` outputs is fit on the
support set's L2-normalized features (full batch, Adam), so any number of ways works.

Set the environment variable ARENA_BASELINE_QUICK=1 to shrink pre-training and the per-task fit
(used by the unit tests).
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.backbones import Conv4

QUICK = os.environ.get("ARENA_BASELINE_QUICK") == "1"
PRETRAIN_BATCHES = 4 if QUICK else 400
PRETRAIN_LEARNING_RATE = 1e-3
HEAD_STEPS = 20 if QUICK else 100
HEAD_LEARNING_RATE = 0.1
LOG_EVERY = 25
WEIGHTS_FILE = "backbone.pt"


def compute_features(backbone: Conv4, images: torch.Tensor) -> torch.Tensor:
    """L2-normalized frozen features `[n, d]` of images `[n, 3, 128, 128]`."""
    backbone.eval()
    with torch.no_grad():
        return F.normalize(backbone(images), dim=1)


class MyMetaLearner(MetaLearner):
    """Pre-trains Conv4 + linear classifier on batches of all meta-train classes."""

    def __init__(self, train_classes: int, total_classes: int, logger) -> None:
        super().__init__(train_classes, total_classes, logger)
        self.backbone = Conv4()
        self.classifier = nn.Linear(self.backbone.out_features, total_classes)

    def meta_fit(self, meta_train_generator, meta_valid_generator) -> Learner:
        network = nn.Sequential(self.backbone, self.classifier)
        optimizer = torch.optim.Adam(network.parameters(), lr=PRETRAIN_LEARNING_RATE)
        network.train()
        for i, (images, labels) in enumerate(meta_train_generator(PRETRAIN_BATCHES)):
            logits = network(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % LOG_EVERY == 0:
                self.log([images, labels], logits.detach().numpy(), loss.item())
        return MyLearner(self.backbone)


class MyLearner(Learner):
    """Holds the pre-trained backbone; `fit` trains a new linear head on the support set."""

    def __init__(self, backbone: Conv4 | None = None) -> None:
        super().__init__()
        self.backbone = backbone if backbone is not None else Conv4()

    def fit(self, support_set) -> Predictor:
        support_x, support_y, _, n_ways, _ = support_set
        features = compute_features(self.backbone, support_x)
        head = nn.Linear(features.shape[1], n_ways)
        optimizer = torch.optim.Adam(head.parameters(), lr=HEAD_LEARNING_RATE)
        for _ in range(HEAD_STEPS):
            loss = F.cross_entropy(head(features), support_y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return MyPredictor(self.backbone, head)

    def save(self, path_to_save: str) -> None:
        torch.save(self.backbone.state_dict(), os.path.join(path_to_save, WEIGHTS_FILE))

    def load(self, path_to_load: str) -> None:
        path = os.path.join(path_to_load, WEIGHTS_FILE)
        self.backbone.load_state_dict(torch.load(path, weights_only=True))


class MyPredictor(Predictor):
    """Scores queries with the task's linear head on frozen features."""

    def __init__(self, backbone: Conv4, head: nn.Linear) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Returns logits `[n_query, n_ways]`."""
        with torch.no_grad():
            return self.head(compute_features(self.backbone, query_set)).numpy()
