"""Which datasets the within-domain protocol uses, and for what.

Two variants (`ProtocolParams.within_domain_variant`), labelled by what they are:
  - "per-dataset": the NeurIPS'22 paper's within-domain experiment, one dataset divided 70/15/15
    into train/valid/test classes and meta-trained on that dataset only (one phase per dataset,
    as MetaDL'21 ran one child phase per dataset); `params.datasets` names it.
  - "collection" (default, the platform's design): every dataset divided 70/15/15, one learner
    meta-trained on the training classes of all of them, tested on each one's test classes.
    NeurIPS'21's within-domain phase is neither: it reserved half of each dataset's classes.
Both come from the same functions: the views and the tests cover `params.datasets` when given,
every dataset of the collection otherwise (`meta_splits` plays no part).

Every class of a dataset goes to train, valid or test (`splits.compute_within_domain_split`,
70/15/15 by default). The split depends on the class count alone, so a small dataset may leave
fewer test classes than a task has ways (20 classes give 14/3/3: no 5-way task). Choice:
  - Datasets named by the phase (`params.datasets`) are the organizer's explicit request: each
    must be splittable and serve the task shape, or the plan fails naming the dataset and the fix.
  - Otherwise every dataset of the collection is a candidate. One that cannot be split at all
    (no training class left) is left out of everything. One that can be split but whose test
    classes cannot serve `n_ways` x (`n_shots` + `n_queries`) is not tested, yet its train and
    valid classes stay in the views: its test classes reach no view and no task, so nothing
    leaks, and dropping the rest would only starve meta-training.
  - When no dataset can be tested the plan fails, listing each dataset's test classes.
We skip rather than shrink tasks or change the split: a 3-way task is not the protocol's 5-way
task, and a per-dataset split rule would make scores incomparable across datasets. The sample
collection (`starting_kit/sample_data.py`) carries a domain large enough to be tested.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from submission_api.protocols.params import ProtocolParams
from submission_api.protocols.splits import compute_within_domain_split
from submission_api.sampling.pools import compute_query_pool_size

if TYPE_CHECKING:
    from submission_api.data.collection import Collection

Split = tuple[np.ndarray, np.ndarray, np.ndarray]


def _candidates(params: ProtocolParams, collection: Collection) -> list[str]:
    return list(params.datasets) if params.datasets is not None else sorted(collection.datasets)


def _dataset(collection: Collection, name: str) -> Any:
    if name not in collection.datasets:
        raise ValueError(
            f"Dataset {name!r} is not in collection {collection.name!r} (has "
            f"{sorted(collection.datasets)}); fix the phase's datasets or meta_splits.txt."
        )
    return collection.datasets[name]


def compute_within_domain_splits(params: ProtocolParams,
                                 collection: Collection) -> dict[str, Split]:
    """Dataset name -> its (train, valid, test) class ids, for every dataset the protocol uses
    (module docstring); datasets in name order, or in `params.datasets` order.

    Raises:
        ValueError: a dataset named in `params.datasets` is unknown or cannot be split.
    """
    splits = {}
    for name in _candidates(params, collection):
        ds = _dataset(collection, name)
        try:
            splits[name] = compute_within_domain_split(
                len(ds.class_names), params.classes_split, params.split_seed, name)
        except ValueError:
            if params.datasets is not None:
                raise
    return splits


def count_servable_classes(labels: np.ndarray, class_ids: np.ndarray, n_shots: int,
                           n_queries: int) -> int:
    """How many of `class_ids` can give `n_shots` support and `n_queries` query images once
    split into the run's disjoint pools (`sampling.pools`), whatever the run seed."""
    sizes = np.bincount(np.asarray(labels, dtype=np.int64))
    count = 0
    for c in np.asarray(class_ids, dtype=np.int64).tolist():
        n = int(sizes[c]) if c < len(sizes) else 0
        query = compute_query_pool_size(n, n_queries)
        count += int(query >= n_queries and n - query >= n_shots)
    return count


def _unservable(params: ProtocolParams, ds: Any, split: Split, servable: int) -> ValueError:
    return ValueError(
        f"Dataset {ds.name!r}: the within-domain split {params.classes_split} of its "
        f"{len(ds.class_names)} classes leaves {len(split[2])} test classes, {servable} able to "
        f"give {params.n_shots} shots + {params.n_queries} queries, expected >= "
        f"n_ways={params.n_ways}; raise the test fraction, lower n_ways, or leave this "
        "dataset out (params.datasets)."
    )


def plan_within_domain_tests(params: ProtocolParams, collection: Collection) -> dict[str, Split]:
    """The datasets to test, with their splits: those whose test classes can serve the task.

    Raises:
        ValueError: a dataset named in `params.datasets` cannot serve the task, or none can.
    """
    tested, skipped = {}, []
    for name, split in compute_within_domain_splits(params, collection).items():
        ds = collection.datasets[name]
        n_ways, n_shots, n_queries = params.shape
        servable = count_servable_classes(ds.labels, split[2], n_shots, n_queries)
        if servable >= n_ways:
            tested[name] = split
        elif params.datasets is not None:
            raise _unservable(params, ds, split, servable)
        else:
            skipped.append(f"{name}: {servable} of {len(split[2])} test classes")
    if not tested:
        raise ValueError(
            f"No dataset of collection {collection.name!r} can give within-domain "
            f"{params.n_ways}-way {params.n_shots}-shot {params.n_queries}-query test tasks "
            f"under the split {params.classes_split} (usable test classes: "
            f"{'; '.join(skipped) or 'no splittable dataset'}); expected at least one dataset "
            f"with >= {params.n_ways}; add a dataset with more classes (the sample collection "
            "of `arena data generate` has one), or lower n_ways."
        )
    return tested
