"""Meta-Dataset's variable-way variable-shot episodes, class-imbalanced support
(Triantafillou et al., "Meta-Dataset", ICLR 2020, Sec. 3.2 and Appendix).

Steps, each a draw from the one generator, in the order of google-research/meta-dataset's
`meta_dataset/data/sampling.py`: ways, classes, (queries: no draw), beta, log-weights, images.
Constants are the defaults of Meta-Dataset's `EpisodeDescriptionConfig`.

Formulas (`EpisodeDescriptionSampler.sample_episode_description` and the functions it calls),
with `n_c` the size of class c:
  - q = min(10, min over the chosen classes of floor(n_c / 2))          (`compute_num_query`)
  - remaining_c = n_c - q
  - S = min(500, sum_c floor(beta * min(100, remaining_c) + 1)), beta ~ U[0, 1)
                                                                  (`sample_support_set_size`)
  - k_c = min(floor(R_c * (S - N)) + 1, remaining_c), R_c ∝ n_c * exp(alpha_c),
    alpha_c ~ U(ln 1/2, ln 2)                                 (`sample_num_support_per_class`)
  - bilevel hierarchy (super-categories, for the datasets a phase marks hierarchical): the
    `ignore_hierarchy_probability` coin (`rng.choice([True, False], p=[1, 0])`: one uniform
    draw, always "use it" at Meta-Dataset's default probability 0), then a super-category
    uniformly, then N ~ U{5..min(50, its classes)}, then N of its classes uniformly
    (`sample_class_ids`). A super-category with fewer than 5 classes is refused, as the
    sampler's constructor refuses it.

Pools: shared pools (meta-train) are the classes themselves. A meta-test run keeps disjoint
pools so no query image is ever a support image of another task of the run; they are sized from
the same formulas: class c's query pool holds min(10, floor(n_c / 2)) images — the most queries
any episode can ask of it — and its support pool the other n_c - min(10, floor(n_c / 2)). An
episode computes q, remaining_c, S and k_c from the full class sizes exactly as above; the only
extra cap is k_c <= |support pool of c|, which binds only when the episode's q is below c's own
query-pool size (c shares the episode with a class of fewer than 20 images).
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


def compute_md_query_pool_size(n_images: int) -> int:
    """Query-pool size of a class of `n_images` in a meta-test run: min(10, floor(n / 2)), the
    largest q = min(10, min_c floor(n_c / 2)) any episode can ask of it."""
    return min(MD_MAX_NUM_QUERY, n_images // 2)


def compute_md_limits(pools: ClassPools) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class: size `n_c`, most queries it can give, most support images it can give.

    Shared pools: `n_c`, `floor(n_c / 2)`, `n_c` (an episode subtracts its q). Disjoint pools:
    `|S_c| + |Q_c|`, `min(floor(n_c / 2), |Q_c|)`, `|S_c|`.
    """
    n_support = np.array([len(p) for p in pools.support], dtype=np.int64)
    n_query = np.array([len(p) for p in pools.query], dtype=np.int64)
    if pools.disjoint:
        sizes = n_support + n_query
        return sizes, np.minimum(sizes // 2, n_query), n_support
    return n_support, n_support // 2, n_support


def sample_md_class_ids(
    eligible: np.ndarray,
    super_categories: np.ndarray | None,
    rng: np.random.Generator,
    min_ways: int = MD_MIN_WAYS,
) -> np.ndarray:
    """Choose the ways and classes of one episode.

    With super-categories (Meta-Dataset's bilevel hierarchy, used for Omniglot alphabets): the
    ignore-hierarchy coin (one `rng.choice([True, False], p=[1.0, 0.0])`, as `sampling.py`
    draws it), a super-category uniformly (`rng.choice(superclass_set, 1)[0]`), then
    N ~ U{min_ways..min(50, its eligible classes)}, then N of its classes uniformly. As
    Meta-Dataset's constructor, a super-category with fewer than `min_ways` classes is refused.
    Without super-categories: N ~ U{min_ways..min(50, eligible)} over all classes.

    Raises:
        ValueError: super-categories given, one with fewer than `min_ways` eligible classes.
    """
    pool = np.sort(eligible)
    if super_categories is not None:
        supers = np.asarray(super_categories, dtype=np.int64)[pool]
        values, counts = np.unique(supers, return_counts=True)
        small = values[counts < min_ways]
        if small.size:
            raise ValueError(
                f"Super-categories {small.tolist()[:10]} have fewer than {min_ways} classes with "
                f">= 2 images ({counts[counts < min_ways].tolist()[:10]}); Meta-Dataset's bilevel "
                f"sampling refuses a super-category smaller than min_ways={min_ways}. Fix: merge "
                "small super-categories, or do not list this dataset in the phase's "
                "hierarchical_datasets (its classes are then sampled flat)."
            )
        rng.choice([True, False], p=[1.0, 0.0])  # ignore_hierarchy coin (sampling.py:436)
        chosen = rng.choice(values, 1)[0]
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
    queries for every way, q = min(10, min_c floor(n_c / 2)); 1 <= k_c <= n_c - q, total
    support <= 500; with super-categories, all classes from one super-category (see
    `sample_md_class_ids`); `n_shots` is the median k_c rounded. Draw order: ways, classes,
    beta, log-weights, then the images.

    Raises:
        ValueError: fewer than `min_ways` classes with >= 2 images (1 support, 1 query), or no
            super-category able to give `min_ways` of them.
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
    remaining = sizes[class_ids] - n_queries
    shots = sample_md_shots(sizes[class_ids].astype(np.float64), remaining, rng)
    if pools.disjoint:
        shots = np.minimum(shots, support_left[class_ids])
    drawn = [
        sample_class_images(pools, c, int(k), n_queries, rng)
        for c, k in zip(class_ids, shots, strict=True)
    ]
    return build_episode(
        dataset, class_ids, [s for s, _ in drawn], [q for _, q in drawn], rng, group=group
    )
