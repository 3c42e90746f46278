"""Which images of each class may be drawn as support and which as query.

Meta-train tasks use *shared* pools: one pool per class, and a task draws its support and query
from it without overlap. Meta-test tasks take one of two rules, the phase's `test_pools`
(`TEST_POOLS`, chosen by `sample_test_pools`):
  - `per_task` (default): shared pools, so every task draws its support and query afresh from
    the whole class, as the NeurIPS'22 kit and Meta-Dataset do. Tasks are then independent
    draws, and the t interval over tasks covers the mean over the task distribution
    (docs/statistics.md: 95% intervals cover 93-97% against fresh test seeds). An image may be
    a query of one task and a support image of another; no task can learn that, since each
    task reaches participant code alone and nothing survives it (DESIGN.md, sandbox).
  - `per_run`: *disjoint* pools, drawn once per dataset per run from the run's seed, so that no
    query image ever appears with its label in any task of the run. Every task then reuses the
    same few query images per class, so the tasks are not independent and the t interval over
    tasks undercovers (53% for Meta-Dataset at 600 tasks); the interval reported is then one
    *conditional on the run's query images*. FewSTAB's 5-shot tasks rarely exist under it
    (half of each class is left to each rule), so FewSTAB too defaults to `per_task`.

Disjoint split rule, for a class with `n` images and a protocol asking `q` queries per class:
  - `n > q`:  query pool = `max(q, ceil(n / 2))` images, support pool = the rest (>= 1 image).
    With Meta-Album's 40 images per class and q = 20 this is 20 / 20, so k <= 20 exactly as
    the NeurIPS'22 kit allows (k <= n - q); larger classes give queries half their images.
  - `n <= q`: query pool = `floor(n / 2)`, support pool = the rest. Such a class cannot serve a
    task that needs `q` queries.
A sampler with its own rule passes `query_pool_size` (Meta-Dataset: min(10, floor(n / 2)),
`meta_dataset.compute_md_query_pool_size`).
Only labels and indices are read here, never pixels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from submission_api.sampling.episode import ClassPools


def compute_class_members(
    labels: np.ndarray, n_classes: int, allowed: np.ndarray | None = None
) -> list[np.ndarray]:
    """Sorted image indices of each class `0..n_classes-1`, restricted to `allowed` if given."""
    labels = np.asarray(labels, dtype=np.int64)
    idx = np.arange(len(labels), dtype=np.int64)
    if allowed is not None:
        idx = np.unique(np.asarray(allowed, dtype=np.int64))
        if idx.size and (idx[0] < 0 or idx[-1] >= len(labels)):
            raise ValueError(
                f"Allowed image indices span {idx[0]}..{idx[-1]}, expected 0..{len(labels) - 1}; "
                "pass indices into this dataset's images."
            )
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(
            f"Labels span {labels.min()}..{labels.max()}, expected 0..{n_classes - 1}; "
            "pass n_classes = len(dataset.class_names)."
        )
    sub = labels[idx]
    order = np.argsort(sub, kind="stable")
    bounds = np.searchsorted(sub[order], np.arange(n_classes + 1))
    return [idx[order[bounds[c]:bounds[c + 1]]] for c in range(n_classes)]


def compute_shared_pools(
    labels: np.ndarray, n_classes: int, allowed: np.ndarray | None = None
) -> ClassPools:
    """Meta-train pools: support and query of a class are the same array."""
    members = tuple(compute_class_members(labels, n_classes, allowed))
    return ClassPools(support=members, query=members, disjoint=False)


def compute_query_pool_size(n_images: int, n_queries: int) -> int:
    """Size of a class's query pool under the split rule of this module's docstring."""
    if n_images > n_queries:
        return max(n_queries, -(-n_images // 2))
    return n_images // 2


def sample_disjoint_pools(
    labels: np.ndarray,
    n_classes: int,
    n_queries: int,
    rng: np.random.Generator,
    allowed: np.ndarray | None = None,
    query_pool_size: Callable[[int], int] | None = None,
) -> ClassPools:
    """Split every class at random into a query pool and a support pool (module docstring).

    Args:
        query_pool_size: class size -> query-pool size; default `compute_query_pool_size(n,
            n_queries)`.

    Returns:
        ClassPools with `disjoint=True`; for every class, support and query are sorted, share
        no index, and their union is the class's (allowed) images.
    """
    support, query = [], []
    for members in compute_class_members(labels, n_classes, allowed):
        shuffled = rng.permutation(members)
        n_query = (compute_query_pool_size(len(members), n_queries) if query_pool_size is None
                   else query_pool_size(len(members)))
        query.append(np.sort(shuffled[:n_query]))
        support.append(np.sort(shuffled[n_query:]))
    return ClassPools(support=tuple(support), query=tuple(query), disjoint=True)


TEST_POOLS = ("per_task", "per_run")
"""Meta-test pool rules (module docstring); `per_task` is every protocol's default."""


def sample_test_pools(
    rule: str,
    labels: np.ndarray,
    n_classes: int,
    n_queries: int,
    rng: np.random.Generator,
    allowed: np.ndarray | None = None,
    query_pool_size: Callable[[int], int] | None = None,
) -> ClassPools:
    """The pools a meta-test dataset's episodes draw from under `rule` (`TEST_POOLS`).

    `per_task` returns shared pools and draws nothing from `rng`; `per_run` draws disjoint pools
    (`sample_disjoint_pools`, same arguments).

    Raises:
        ValueError: `rule` is not one of TEST_POOLS.
    """
    if rule == "per_task":
        return compute_shared_pools(labels, n_classes, allowed)
    if rule == "per_run":
        return sample_disjoint_pools(labels, n_classes, n_queries, rng, allowed, query_pool_size)
    raise ValueError(f"test_pools={rule!r} is unknown; expected one of {TEST_POOLS}.")


def compute_capacities(pools: ClassPools, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """Per class: how many support images a task asking `n_queries` queries can still get, and
    how many query images the class can give.

    Shared pools: support `n_c - n_queries` (clipped at 0), query `n_c`. Disjoint: the pool sizes.
    """
    n_support = np.array([len(p) for p in pools.support], dtype=np.int64)
    n_query = np.array([len(p) for p in pools.query], dtype=np.int64)
    if not pools.disjoint:
        n_support = np.maximum(n_support - n_queries, 0)
    return n_support, n_query


def sample_class_images(
    pools: ClassPools, class_id: int, n_shots: int, n_queries: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw `n_shots` support and `n_queries` query images of one class, without overlap."""
    if pools.disjoint:
        support = rng.choice(pools.support[class_id], n_shots, replace=False)
        query = rng.choice(pools.query[class_id], n_queries, replace=False)
        return support, query
    drawn = rng.choice(pools.support[class_id], n_shots + n_queries, replace=False)
    return drawn[:n_shots], drawn[n_shots:]
