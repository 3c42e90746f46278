"""Meta-Dataset's variable-way variable-shot episodes, class-imbalanced support
(Triantafillou et al., "Meta-Dataset", ICLR 2020, Sec. 3.2 and Appendix).

Steps, each a draw from the one generator, in the order of google-research/meta-dataset's
`meta_dataset/data/sampling.py`: ways, classes, (queries: no draw), beta, log-weights, images.
Constants are the defaults of Meta-Dataset's `EpisodeDescriptionConfig`.

Pools: with shared pools (meta-train) `n_c` is the class size as in the paper. With disjoint
pools (a meta-test run) the query pool stands for "the images a query may use" and the support
pool for "what remains for support": `q = min(10, min_c |Q_c|)` replaces `min_c floor(n_c/2)`,
and `|S_c|` replaces `n_c - q` in the support-size and shot caps. The class weights keep the
full class size `n_c = |S_c| + |Q_c|`, so the dataset's natural imbalance drives the shots.
"""

from __future__ import annotations

import math

import numpy as np

from submission_api.sampling.episode import ClassPools, Episode, build_episode
from submission_api.sampling.pools import sample_class_images

MD_MIN_WAYS = 5
"""Fewest ways of an episode (EpisodeDescriptionConfig.min_ways)."""
MD_MAX_WAYS_UPPER_BOUND = 50
"""N ~ U{5..min(50, C)} (EpisodeDescriptionConfig.max_ways_upper_bound)."""
MD_MAX_NUM_QUERY = 10
"""q = min(10, min_c floor(n_c / 2)) (EpisodeDescriptionConfig.max_num_query)."""
MD_MAX_SUPPORT_SET_SIZE = 500
"""Cap on the total support size S (EpisodeDescriptionConfig.max_support_set_size)."""
MD_MAX_SUPPORT_SIZE_CONTRIB_PER_CLASS = 100
"""A class adds at most floor(beta * 100 + 1) to S (max_support_size_contrib_per_class)."""
MD_MIN_LOG_WEIGHT = math.log(0.5)
MD_MAX_LOG_WEIGHT = math.log(2.0)
"""alpha_c ~ U(ln 1/2, ln 2): class weights vary by up to a factor 4 beyond the class size."""


def compute_md_limits(pools: ClassPools) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class: size `n_c`, query limit, and support images left once queries are taken.

    Shared pools: query limit `floor(n_c / 2)`; support left is computed per episode
    (`n_c - q`) and returned here as `n_c`. Disjoint pools: `|Q_c|` and `|S_c|`.
    """
    n_support = np.array([len(p) for p in pools.support], dtype=np.int64)
    n_query = np.array([len(p) for p in pools.query], dtype=np.int64)
    if pools.disjoint:
        return n_support + n_query, n_query, n_support
    return n_support, n_support // 2, n_support


def sample_md_class_ids(
    eligible: np.ndarray,
    super_categories: np.ndarray | None,
    rng: np.random.Generator,
    min_ways: int = MD_MIN_WAYS,
) -> np.ndarray:
    """Choose the ways and classes of one episode.

    With super-categories (Meta-Dataset's bilevel hierarchy, used for Omniglot alphabets): pick a
    super-category uniformly among those with >= `min_ways` eligible classes, then
    N ~ U{min_ways..min(50, its eligible classes)} classes uniformly within it. Without them, or
    when no super-category is large enough: N ~ U{min_ways..min(50, eligible)} over all classes.
    """
    pool = np.sort(eligible)
    if super_categories is not None:
        supers = np.asarray(super_categories, dtype=np.int64)[pool]
        values, counts = np.unique(supers, return_counts=True)
        big = values[counts >= min_ways]
        if big.size:
            chosen = big[rng.integers(len(big))]
            pool = pool[supers == chosen]
    top = min(MD_MAX_WAYS_UPPER_BOUND, len(pool))
    n_ways = int(rng.integers(min_ways, top + 1))
    return rng.choice(pool, n_ways, replace=False)


def sample_md_shots(
    sizes: np.ndarray, remaining: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Shots per class: S = min(500, sum floor(beta * min(100, remaining) + 1)),
    weights sizes * exp(alpha), k_c = min(floor(R_c * (S - N)) + 1, remaining_c).

    Invariant: 1 <= k_c <= remaining_c and sum k_c <= S, for remaining_c >= 1.
    """
    beta = rng.uniform()
    contributions = np.minimum(MD_MAX_SUPPORT_SIZE_CONTRIB_PER_CLASS, remaining)
    support_size = min(int(np.floor(beta * contributions + 1).sum()), MD_MAX_SUPPORT_SET_SIZE)
    alpha = rng.uniform(MD_MIN_LOG_WEIGHT, MD_MAX_LOG_WEIGHT, size=len(sizes))
    weights = sizes * np.exp(alpha)
    proportions = weights / weights.sum()
    desired = np.floor(proportions * (support_size - len(sizes))).astype(np.int64) + 1
    return np.minimum(desired, remaining)


def sample_meta_dataset_episode(
    pools: ClassPools,
    rng: np.random.Generator,
    dataset: str,
    super_categories: np.ndarray | None = None,
    group: str = "test",
    min_ways: int = MD_MIN_WAYS,
) -> Episode:
    """Draw one Meta-Dataset episode from one dataset's pools.

    Invariants of the output: `min_ways <= n_ways <= min(50, eligible classes)`; the same `q`
    queries for every way with `1 <= q <= 10`; `1 <= k_c`, total support <= 500; with
    super-categories, all classes from one super-category (see `sample_md_class_ids`);
    `n_shots` is the median k_c rounded.

    Raises:
        ValueError: fewer than `min_ways` classes with >= 1 support and >= 1 query image.
    """
    sizes, query_limit, support_left = compute_md_limits(pools)
    eligible = np.flatnonzero((query_limit >= 1) & (support_left >= 1))
    if len(eligible) < min_ways:
        raise ValueError(
            f"Dataset {dataset!r} has {len(eligible)} classes with >= 2 images (1 support, "
            f"1 query), expected at least {min_ways} for a Meta-Dataset episode; use a larger "
            "dataset or lower min_ways."
        )
    class_ids = sample_md_class_ids(eligible, super_categories, rng, min_ways)
    n_queries = int(min(MD_MAX_NUM_QUERY, query_limit[class_ids].min()))
    remaining = support_left[class_ids] - (0 if pools.disjoint else n_queries)
    shots = sample_md_shots(sizes[class_ids].astype(np.float64), remaining, rng)
    drawn = [
        sample_class_images(pools, c, int(k), n_queries, rng)
        for c, k in zip(class_ids, shots, strict=True)
    ]
    return build_episode(
        dataset, class_ids, [s for s, _ in drawn], [q for _, q in drawn], rng, group=group
    )
