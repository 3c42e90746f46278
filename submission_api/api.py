"""The participant contract: the classes a submission's `model.py` subclasses as `MyMetaLearner`
and `MyLearner`. Signatures are those of the NeurIPS'22 Cross-Domain MetaDL starting kit, so a
zip written for that kit runs here unchanged.

Life cycle, as the runner drives it: `MyMetaLearner(train_classes, total_classes, logger)`, then
`meta_fit(meta_train_generator, meta_valid_generator)` returns a `Learner`, which is saved once;
for every test task a fresh `MyLearner()` is loaded from that save, `fit` on the support set and
its `Predictor` asked to `predict` the query images.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

SupportSet = tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int]
"""`(X, y, original_y, n_ways, k_shots)`: X float32 `[n_ways*k_shots, 3, 128, 128]` in [0, 1]."""


class Predictor:
    """Returned by `Learner.fit`; predicts the query images of one task."""

    def __init__(self) -> None:
        pass

    def predict(self, query_set: torch.Tensor) -> np.ndarray:
        """Predict the query images.

        Args:
            query_set: float32 `[n_query, 3, 128, 128]` in [0, 1].

        Returns:
            Labels `[n_query]` in `0..n_ways-1`, or scores `[n_query, n_ways]` (argmax is taken).
        """
        raise NotImplementedError(
            "You should implement the predict method for the Predictor class."
        )


class Learner:
    """Adapts to the support set of one unseen task. Must work with no constructor arguments:
    the runner builds a fresh one per test task and calls `load`."""

    def __init__(self) -> None:
        pass

    def fit(self, support_set: SupportSet) -> Predictor:
        """Fit to a support set `(X, y, original_y, n_ways, k_shots)` and return a Predictor."""
        raise NotImplementedError("You should implement the fit method for the Learner class.")

    def save(self, path_to_save: str) -> None:
        """Save what `load` needs into the folder `path_to_save`."""
        raise NotImplementedError("You should implement the save method for the Learner class.")

    def load(self, path_to_load: str) -> None:
        """Load what `save` wrote into the folder `path_to_load`."""
        raise NotImplementedError("You should implement the load method for the Learner class.")


class MetaLearner:
    """Meta-trains on the meta-train generator and returns a Learner."""

    def __init__(self, train_classes: int, total_classes: int, logger: Any) -> None:
        """
        Args:
            train_classes: ways of a meta-train task in task mode; in batch mode, the number of
                classes across all meta-train datasets.
            total_classes: the number of classes across all meta-train datasets.
            logger: has `log(data, predictions, loss=None, meta_train=True)`.
        """
        self.train_classes = train_classes
        self.total_classes = total_classes
        self.log = logger.log

    def meta_fit(
        self,
        meta_train_generator: Callable[[int], Iterable[Any]],
        meta_valid_generator: Callable[[int], Iterable[Any]] | None,
    ) -> Learner:
        """Meta-train and return a Learner.

        Args:
            meta_train_generator: `meta_train_generator(n)` yields n tasks (task mode) or n
                batches `[X, y]` (batch mode), as chosen in the submission's config.json.
            meta_valid_generator: `meta_valid_generator(n)` yields n tasks from the validation
                datasets, or None when config.json asks for none.
        """
        raise NotImplementedError(
            "You should implement the meta_fit method for the MetaLearner class."
        )
