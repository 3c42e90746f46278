"""Matching Networks baseline (Vinyals, Blundell, Lillicrap, Kavukcuoglu and Wierstra, "Matching
Networks for One Shot Learning", NeurIPS 2016).

A query's class distribution is an attention-weighted sum of the support labels, the attention
being a softmax over cosine similarities between the query's and each support image's Conv4
embeddings. Two simplifications, both common in later re-implementations: no full-context
embeddings (no LSTMs over the support set; one shared embedding for support and query), and a
learned temperature on the cosine similarities, since a softmax over values in [-1, 1] is too
flat to train well. At meta-test the embedding is frozen, so any number of ways and shots works.

Set the environment variable ARENA_BASELINE_QUICK=1 to shrink meta-training to a handful of tasks
(used by the unit tests).
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.backbones import Conv4

QUICK = os.environ.get("ARENA_BASELINE_QUICK") == "1"
META_TRAIN_TASKS = 4 if QUICK else 300
META_VALID_TASKS = 2 if QUICK else 10
LOG_EVERY = 25
LEARNING_RATE = 1e-3
INITIAL_TEMPERATURE = 10.0
WEIGHTS_FILE = "matching_embedding.pt"


class MatchingEmbedding(nn.Module):
    """The Conv4 embedding and the learned cosine temperature, saved together."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = Conv4()
        self.log_temperature = nn.Parameter(torch.tensor(math.log(INITIAL_TEMPERATURE)))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Unit-norm embeddings `[n, d]`."""
        return F.normalize(self.backbone(images), dim=1)

    def class_probabilities(
        self,
        support_embeddings: torch.Tensor,
        support_labels: torch.Tensor,
        n_ways: int,
        query_embeddings: torch.Tensor,
    ) -> torch.Tensor:
        """Attention over the support `[s, d]` summed per class: probabilities `[q, n_ways]`."""
        similarities = query_embeddings @ support_embeddings.T  # cosine, [q, s]
        attention = torch.softmax(self.log_temperature.exp() * similarities, dim=1)
        return attention @ F.one_hot(support_labels, n_ways).to(attention.dtype)


class MyMetaLearner(MetaLearner):
    """Trains the embedding episodically with the negative log-likelihood of the query labels."""

    def __init__(self, train_classes: int, total_classes: int, logger) -> None:
        super().__init__(train_classes, total_classes, logger)
        self.embedding = MatchingEmbedding()

    def meta_fit(self, meta_train_generator, meta_valid_generator) -> Learner:
        optimizer = torch.optim.Adam(self.embedding.parameters(), lr=LEARNING_RATE)
        self.embedding.train()
        for i, task in enumerate(meta_train_generator(META_TRAIN_TASKS)):
            probabilities, query_labels = self._task_probabilities(task)
            loss = F.nll_loss(torch.log(probabilities + 1e-8), query_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % LOG_EVERY == 0:
                self.log(task, probabilities.detach().numpy(), loss.item())
        if meta_valid_generator is not None:
            self.embedding.eval()
            with torch.no_grad():
                for task in meta_valid_generator(META_VALID_TASKS):
                    probabilities, query_labels = self._task_probabilities(task)
                    loss = F.nll_loss(torch.log(probabilities + 1e-8), query_labels)
                    self.log(task, probabilities.numpy(), loss.item(), meta_train=False)
        return MyLearner(self.embedding)

    def _task_probabilities(self, task) -> tuple[torch.Tensor, torch.Tensor]:
        support_x, support_y, _ = task.support_set
        query_x, query_y, _ = task.query_set
        # One forward pass, so that batch norm sees support and query together.
        embeddings = self.embedding(torch.cat([support_x, query_x]))
        n_support = len(support_x)
        probabilities = self.embedding.class_probabilities(
            embeddings[:n_support], support_y, task.num_ways, embeddings[n_support:]
        )
        return probabilities, query_y


class MyLearner(Learner):
    """Holds the trained embedding; `fit` embeds the support set."""

    def __init__(self, embedding: MatchingEmbedding | None = None) -> None:
        super().__init__()
        self.embedding = embedding if embedding is not None else MatchingEmbedding()

    def fit(self, support_set) -> Predictor:
        support_x, support_y, _, n_ways, _ = support_set
        self.embedding.eval()
        with torch.no_grad():
            support_embeddings = self.embedding(support_x)
        return MyPredictor(self.embedding, support_embeddings, support_y, n_ways)

    def save(self, path_to_save: str) -> None:
        torch.save(self.embedding.state_dict(), os.path.join(path_to_save, WEIGHTS_FILE))

    def load(self, path_to_load: str) -> None:
        path = os.path.join(path_to_load, WEIGHTS_FILE)
        self.embedding.load_state_dict(torch.load(path, weights_only=True))


class MyPredictor(Predictor):
    """Scores queries by their attention-weighted support labels."""

    def __init__(
        self,
        embedding: MatchingEmbedding,
        support_embeddings: torch.Tensor,
        support_labels: torch.Tensor,
        n_ways: int,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.support_embeddings = support_embeddings
        self.support_labels = support_labels
        self.n_ways = n_ways

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Returns class probabilities `[n_query, n_ways]`."""
        with torch.no_grad():
            probabilities = self.embedding.class_probabilities(
                self.support_embeddings, self.support_labels, self.n_ways, self.embedding(query_set)
            )
        return probabilities.numpy()
