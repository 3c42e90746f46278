"""Prototypical Networks baseline (Snell, Swersky and Zemel, "Prototypical Networks for Few-shot
Learning", NeurIPS 2017).

Episodic meta-training: the support images of each class are embedded by a Conv4 and averaged
into a prototype; a query is scored by its negative squared euclidean distance to each
prototype. At meta-test the embedding is frozen, so any number of ways and shots works.

Set the environment variable ARENA_BASELINE_QUICK=1 to shrink meta-training to a handful of tasks
(used by the unit tests).
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.nn.functional as F

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.backbones import Conv4

QUICK = os.environ.get("ARENA_BASELINE_QUICK") == "1"
META_TRAIN_TASKS = 4 if QUICK else 300
META_VALID_TASKS = 2 if QUICK else 10
LOG_EVERY = 25
LEARNING_RATE = 1e-3
WEIGHTS_FILE = "backbone.pt"


def compute_prototype_logits(
    support_features: torch.Tensor,
    support_labels: torch.Tensor,
    n_ways: int,
    query_features: torch.Tensor,
) -> torch.Tensor:
    """Negative squared euclidean distances of queries `[q, d]` to the class means of the
    support `[s, d]`; returns logits `[q, n_ways]`."""
    one_hot = F.one_hot(support_labels, n_ways).to(support_features.dtype)  # [s, n_ways]
    prototypes = one_hot.T @ support_features / one_hot.sum(0).unsqueeze(1)  # [n_ways, d]
    return -torch.cdist(query_features, prototypes).pow(2)


class MyMetaLearner(MetaLearner):
    """Trains the Conv4 embedding on meta-train tasks with the prototypical loss."""

    def __init__(self, train_classes: int, total_classes: int, logger) -> None:
        super().__init__(train_classes, total_classes, logger)
        self.backbone = Conv4()

    def meta_fit(self, meta_train_generator, meta_valid_generator) -> Learner:
        optimizer = torch.optim.Adam(self.backbone.parameters(), lr=LEARNING_RATE)
        self.backbone.train()
        for i, task in enumerate(meta_train_generator(META_TRAIN_TASKS)):
            logits, query_labels = self._task_logits(task)
            loss = F.cross_entropy(logits, query_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % LOG_EVERY == 0:
                self.log(task, logits.detach().numpy(), loss.item())
        if meta_valid_generator is not None:
            self.backbone.eval()
            with torch.no_grad():
                for task in meta_valid_generator(META_VALID_TASKS):
                    logits, query_labels = self._task_logits(task)
                    loss = F.cross_entropy(logits, query_labels)
                    self.log(task, logits.numpy(), loss.item(), meta_train=False)
        return MyLearner(self.backbone)

    def _task_logits(self, task) -> tuple[torch.Tensor, torch.Tensor]:
        support_x, support_y, _ = task.support_set
        query_x, query_y, _ = task.query_set
        # One forward pass, so that batch norm sees support and query together.
        features = self.backbone(torch.cat([support_x, query_x]))
        n_support = len(support_x)
        logits = compute_prototype_logits(
            features[:n_support], support_y, task.num_ways, features[n_support:]
        )
        return logits, query_y


class MyLearner(Learner):
    """Holds the trained embedding; `fit` computes the prototypes of a support set."""

    def __init__(self, backbone: Conv4 | None = None) -> None:
        super().__init__()
        self.backbone = backbone if backbone is not None else Conv4()

    def fit(self, support_set) -> Predictor:
        support_x, support_y, _, n_ways, _ = support_set
        self.backbone.eval()
        with torch.no_grad():
            support_features = self.backbone(support_x)
        return MyPredictor(self.backbone, support_features, support_y, n_ways)

    def save(self, path_to_save: str) -> None:
        torch.save(self.backbone.state_dict(), os.path.join(path_to_save, WEIGHTS_FILE))

    def load(self, path_to_load: str) -> None:
        path = os.path.join(path_to_load, WEIGHTS_FILE)
        self.backbone.load_state_dict(torch.load(path, weights_only=True))


class MyPredictor(Predictor):
    """Scores queries by negative squared distance to the support prototypes."""

    def __init__(
        self,
        backbone: Conv4,
        support_features: torch.Tensor,
        support_labels: torch.Tensor,
        n_ways: int,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.support_features = support_features
        self.support_labels = support_labels
        self.n_ways = n_ways

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Returns scores `[n_query, n_ways]`."""
        with torch.no_grad():
            logits = compute_prototype_logits(
                self.support_features, self.support_labels, self.n_ways, self.backbone(query_set)
            )
        return logits.numpy()
