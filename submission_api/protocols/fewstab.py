"""FewSTAB attribute-biased tasks (Zheng et al., "Benchmarking Spurious Bias in Few-Shot Image
Classifiers", ECCV 2024): each way `i` gets its own attribute `a_i`; its support images carry
`a_i`, its query images lack it and preferably carry the other ways' attributes, so a classifier
that leans on `a_i` as a shortcut fails on the queries.

Hard conditions (never relaxed): the `a_i` are distinct; every support image of way `i` carries
`a_i`; every query image of way `i` lacks it; support and query come from the run's disjoint
pools. Relaxation ladder, each step taken only when the data cannot satisfy the one before:
  - attribute level 0: `a_i` carried by >= n_s support-pool images of class `i` and lacking
    from >= n_q of its query-pool images (the protocol's thresholds);
  - attribute level 1: the thresholds drop to what the task needs (n_shots, n_queries);
  - query level 0 (per way): all queries carry at least one other way's `a_j`;
  - query level 1: every such image is used, the remaining queries lack `a_i` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from submission_api.sampling.episode import ClassPools, Episode, build_episode


@dataclass(frozen=True)
class FewstabDraw:
    """A FewSTAB episode with what it was built from: the attribute of each way, the attribute
    level (0 or 1) and the query level of each way (see module docstring)."""

    episode: Episode
    attributes: tuple[str, ...]
    attribute_level: int
    query_levels: tuple[int, ...]


def compute_attribute_candidates(
    pools: ClassPools, attributes: Sequence[frozenset[str]], n_s: int, n_q: int
) -> list[list[str]]:
    """Per class, the sorted attributes carried by >= n_s support-pool images and lacking from
    >= n_q query-pool images."""
    out = []
    for support, query in zip(pools.support, pools.query, strict=True):
        carried: dict[str, int] = {}
        for i in support:
            for a in attributes[i]:
                carried[a] = carried.get(a, 0) + 1
        lacking = {a: sum(a not in attributes[i] for i in query) for a in carried}
        out.append(sorted(a for a, n in carried.items() if n >= n_s and lacking[a] >= n_q))
    return out


def sample_distinct_attributes(
    candidates: list[list[str]], n_ways: int, rng: np.random.Generator
) -> list[tuple[int, str]] | None:
    """Up to `n_ways` (class, attribute) pairs with distinct attributes, classes tried in random
    order and kept when an augmenting path (Kuhn's matching) fits them in; None if fewer."""
    order = {c: [str(a) for a in rng.permutation(cands)]
             for c, cands in enumerate(candidates) if cands}
    owner: dict[str, int] = {}

    def assign(c: int, visited: set[str]) -> bool:
        for a in order[c]:
            if a not in visited:
                visited.add(a)
                if a not in owner or assign(owner[a], visited):
                    owner[a] = c
                    return True
        return False

    chosen = []
    for c in rng.permutation(sorted(order)).tolist():
        if assign(c, set()):
            chosen.append(c)
            if len(chosen) == n_ways:
                by_class = {cls: a for a, cls in owner.items()}
                return [(cls, by_class[cls]) for cls in chosen]
    return None


def _sample_queries(
    query_pool: np.ndarray, attributes: Sequence[frozenset[str]], own: str, others: set[str],
    n_queries: int, rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    lacking = [i for i in query_pool.tolist() if own not in attributes[i]]
    biased = [i for i in lacking if attributes[i] & others]
    if len(biased) >= n_queries:
        return rng.choice(np.asarray(biased, np.int64), n_queries, replace=False), 0
    rest = np.asarray([i for i in lacking if not attributes[i] & others], np.int64)
    fill = rng.choice(rest, n_queries - len(biased), replace=False)
    return np.concatenate([np.asarray(biased, np.int64), fill]), 1


def compute_attribute_ladder(
    pools: ClassPools, attributes: Sequence[frozenset[str]], n_shots: int, n_queries: int,
    n_s: int, n_q: int,
) -> tuple[list[list[str]], ...]:
    """Candidates of every class at attribute level 0 (n_s, n_q) and level 1 (n_shots,
    n_queries). Depends on the pools only: compute once per run and dataset."""
    return tuple(compute_attribute_candidates(pools, attributes, s, q)
                 for s, q in ((n_s, n_q), (n_shots, n_queries)))


def _sample_attribute_pairs(
    ladder: tuple[list[list[str]], ...], rng: np.random.Generator, n_ways: int
) -> tuple[list[tuple[int, str]] | None, int]:
    """Climb the attribute ladder: the first level that gives `n_ways` distinct pairs."""
    for level, candidates in enumerate(ladder):
        pairs = sample_distinct_attributes(candidates, n_ways, rng)
        if pairs is not None:
            return pairs, level
    return None, len(ladder)


def sample_fewstab_episode(
    pools: ClassPools, attributes: Sequence[frozenset[str]], rng: np.random.Generator,
    dataset: str, n_ways: int, n_shots: int, n_queries: int, n_s: int, n_q: int,
    ladder: tuple[list[list[str]], ...] | None = None,
) -> FewstabDraw:
    """Draw one attribute-biased episode (group 'fewstab-A') following the module's ladder.

    `ladder`: `compute_attribute_ladder(...)` of these pools, to skip recomputing it per episode.

    Raises:
        ValueError: fewer than `n_ways` classes can get distinct attributes even at level 1.
    """
    if ladder is None:
        ladder = compute_attribute_ladder(pools, attributes, n_shots, n_queries, n_s, n_q)
    pairs, level = _sample_attribute_pairs(ladder, rng, n_ways)
    if pairs is None:
        raise ValueError(
            f"Dataset {dataset!r}: fewer than {n_ways} classes have a distinct attribute carried "
            f"by >= {n_shots} support-pool and lacking from >= {n_queries} query-pool images; "
            "expected enough attribute annotations; lower n_ways or use another dataset."
        )
    chosen = [a for _, a in pairs]
    support, query, levels = [], [], []
    for c, a in pairs:
        carriers = np.asarray([i for i in pools.support[c].tolist() if a in attributes[i]])
        support.append(rng.choice(carriers, n_shots, replace=False))
        picked, q_level = _sample_queries(pools.query[c], attributes, a, set(chosen) - {a},
                                          n_queries, rng)
        query.append(picked)
        levels.append(q_level)
    episode = build_episode(dataset, [c for c, _ in pairs], support, query, rng,
                            n_shots=n_shots, group="fewstab-A")
    return FewstabDraw(episode, tuple(chosen), level, tuple(levels))
