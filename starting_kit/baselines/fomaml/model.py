"""First-order MAML baseline (Finn, Abbeel and Levine, "Model-Agnostic Meta-Learning for Fast
Adaptation of Deep Networks", ICML 2017, first-order approximation of section 5.2).

Meta-training learns an initialization of a Conv4: for each task a copy is adapted to the
support set by a few steps of SGD, and the gradient of the query loss at the adapted weights is
applied to the initialization (first-order: no second derivatives through the inner loop).

Variable ways: only the backbone is meta-learned. The linear head is reset to zeros with
`n_ways` outputs at the start of every task, at meta-train and at meta-test alike, so a test task
of any number of ways starts from the same symmetric state the initialization was trained for.
Batch norm uses the statistics of the batch at hand, as in Finn et al.: the support set while
adapting, the query set when predicting (transductive).

Set the environment variable ARENA_BASELINE_QUICK=1 to shrink meta-training and adaptation (used
by the unit tests).
"""

from __future__ import annotations

import copy
import itertools
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.backbones import Conv4

QUICK = os.environ.get("ARENA_BASELINE_QUICK") == "1"
META_TRAIN_TASKS = 4 if QUICK else 300
META_BATCH_SIZE = 2
META_LEARNING_RATE = 1e-3
INNER_STEPS = 2 if QUICK else 5
TEST_INNER_STEPS = 4 if QUICK else 10
INNER_LEARNING_RATE = 0.1
LOG_EVERY = 25
WEIGHTS_FILE = "initialization.pt"


def adapt(
    initialization: Conv4, support_x: torch.Tensor, support_y: torch.Tensor, n_ways: int, steps: int
) -> tuple[Conv4, nn.Linear]:
    """SGD on a copy of the initialization and a zero head with `n_ways` outputs; returns both."""
    backbone = copy.deepcopy(initialization)
    head = nn.Linear(backbone.out_features, n_ways)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    optimizer = torch.optim.SGD(
        itertools.chain(backbone.parameters(), head.parameters()), lr=INNER_LEARNING_RATE
    )
    backbone.train()
    for _ in range(steps):
        loss = F.cross_entropy(head(backbone(support_x)), support_y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return backbone, head


class MyMetaLearner(MetaLearner):
    """Meta-learns the Conv4 initialization with first-order meta-gradients."""

    def __init__(self, train_classes: int, total_classes: int, logger) -> None:
        super().__init__(train_classes, total_classes, logger)
        self.initialization = Conv4()

    def meta_fit(self, meta_train_generator, meta_valid_generator) -> Learner:
        parameters = list(self.initialization.parameters())
        optimizer = torch.optim.Adam(parameters, lr=META_LEARNING_RATE)
        optimizer.zero_grad()
        for i, task in enumerate(meta_train_generator(META_TRAIN_TASKS)):
            support_x, support_y, _ = task.support_set
            query_x, query_y, _ = task.query_set
            backbone, head = adapt(
                self.initialization, support_x, support_y, task.num_ways, INNER_STEPS
            )
            logits = head(backbone(query_x))
            loss = F.cross_entropy(logits, query_y)
            # First-order: the query gradient at the adapted weights stands in for the gradient
            # with respect to the initialization.
            gradients = torch.autograd.grad(loss, list(backbone.parameters()))
            for parameter, gradient in zip(parameters, gradients, strict=True):
                update = gradient / META_BATCH_SIZE
                parameter.grad = update if parameter.grad is None else parameter.grad + update
            if (i + 1) % META_BATCH_SIZE == 0:
                optimizer.step()
                optimizer.zero_grad()
            if i % LOG_EVERY == 0:
                self.log(task, logits.detach().numpy(), loss.item())
        return MyLearner(self.initialization)


class MyLearner(Learner):
    """Holds the meta-learned initialization; `fit` adapts a copy of it to the support set."""

    def __init__(self, initialization: Conv4 | None = None) -> None:
        super().__init__()
        self.initialization = initialization if initialization is not None else Conv4()

    def fit(self, support_set) -> Predictor:
        support_x, support_y, _, n_ways, _ = support_set
        backbone, head = adapt(self.initialization, support_x, support_y, n_ways, TEST_INNER_STEPS)
        return MyPredictor(backbone, head)

    def save(self, path_to_save: str) -> None:
        torch.save(self.initialization.state_dict(), os.path.join(path_to_save, WEIGHTS_FILE))

    def load(self, path_to_load: str) -> None:
        path = os.path.join(path_to_load, WEIGHTS_FILE)
        self.initialization.load_state_dict(torch.load(path, weights_only=True))


class MyPredictor(Predictor):
    """Scores queries with the adapted copy (batch norm on the query batch's statistics)."""

    def __init__(self, backbone: Conv4, head: nn.Linear) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Returns logits `[n_query, n_ways]`."""
        with torch.no_grad():
            return self.head(self.backbone(query_set)).numpy()
