"""FewSTAB attribute-biased tasks (Zheng et al., "Benchmarking Spurious Bias in Few-Shot Image
Classifiers", ECCV 2024), following `SpuriousTask` of the reference code (gtzheng/FewSTAB):
each way `i` gets its own attribute `a_i`; its support images carry `a_i`, its query images lack
it and carry another way's attribute, so a classifier that leans on `a_i` as a shortcut fails.

The reference's rules, step by step (`SpuriousTask.analyze_attributes` and `.generate`):
  - eligibility: attribute a is eligible for class c when count_c(a) >= n_s and
    |c| - count_c(a) >= n_q, with n_s the shot count (1 or 5) and n_q the queries per class (15);
  - a task draws n_ways distinct eligible attributes uniformly (the reference replaces the count
    weights by uniform ones), then, for each a_i in turn, a class among those eligible for a_i
    *and* for another selected attribute, not already chosen;
  - support: images with a_i and at most `t_s` of the other selected attributes, `t_s` starting at
    0 and growing 0.2 per failed try (back to 0 once a class succeeds);
  - query: images lacking a_i whose mean indicator over the other selected attributes present in
    the class exceeds `t_q` (0: at least one of them; -1 after 5 failed tries in a row: any image
    lacking a_i), and of those the n_q lowest by the score
    sum over the class's non-selected eligible attributes of log(E[x, a] * p_a + 1e-10),
    p_a the attribute's frequency among the candidates — deterministic, not random;
  - any failure restarts the whole task.
Adaptations to the platform: counts are taken in the run's disjoint pools (support images in the
support pool, queries in the query pool) so no query image is ever a support image; attribute
and class lists are sorted (the reference iterates Python sets); ties of the score keep image
order (stable sort); the reference retries forever, here a bounded search (below).

Bounded search, same tasks in distribution: the reference restarts on any failure, so its task
is its first success, and a draw of attributes that no assignment of distinct classes can serve
(way i needs a class eligible for a_i and for another selected attribute) never succeeds. Such
draws are recognised at once by a matching check (`can_assign_classes`) and redrawn without a
try (at most `MAX_ATTRIBUTE_DRAWS`); this removes only zero-probability paths, so the accepted
tasks keep the reference's distribution while 5-shot tasks, whose eligible classes are few,
become reachable (on the sample data's spurious domain without the check, none in 10^6 tries;
with it, a few hundred tries). Tries that reach the support and query rules are bounded by
`MAX_TRIES`; a dataset exhausting either bound fails with a clear error. One difference stays,
documented rather than matched: in the reference such a draw is a failed try, and a failed try
moves the support threshold (+0.2) and the query-failure count for the next one; a draw rejected
here moves neither, so the next try starts from the thresholds it would have had without that
draw. No difference in the tasks could be measured (300 1-shot and 40 5-shot tasks, issue 36).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from submission_api.sampling.episode import ClassPools, Episode, build_episode

SUPPORT_THRESHOLD_STEP = 0.2
"""Reference: `failed_attempts_support += 0.2` after a class's support could not be filled."""
QUERY_FAILURES_BEFORE_ANY = 5
"""Reference: after 5 failed query tries in a row, `query_threshold = -1` (any image without
a_i)."""
SCORE_EPSILON = 1e-10
"""Reference: `np.log(E * p + 1e-10)`."""
MAX_TRIES = 20_000
"""Tries through the support and query rules per task (the reference loops until one
succeeds); on the sample data a 5-shot task takes a few hundred, a 1-shot one about 300."""
MAX_ATTRIBUTE_DRAWS = 1_000_000
"""Attribute draws per task that `can_assign_classes` may reject (a microsecond-scale check)."""


@dataclass(frozen=True)
class FewstabDraw:
    """A FewSTAB episode with the attribute of each way and how many tries it took."""

    episode: Episode
    attributes: tuple[str, ...]
    tries: int


@dataclass(frozen=True)
class FewstabIndex:
    """What every task of one dataset's pools draws from: eligible attributes (sorted), the
    classes each is eligible for, and each class's attribute vocabulary (attributes any of its
    pooled images carries). Depends on the pools only: computed once per run and dataset."""

    attributes: tuple[str, ...]
    classes_of: dict[str, tuple[int, ...]]
    vocabulary: tuple[frozenset[str], ...]


def compute_fewstab_index(
    pools: ClassPools, attributes: Sequence[frozenset[str]], n_s: int, n_q: int
) -> FewstabIndex:
    """Eligibility (module docstring): a for c when >= n_s support-pool images of c carry a and
    >= n_q query-pool images of c lack it."""
    classes_of: dict[str, list[int]] = {}
    vocabulary = []
    for c, (support, query) in enumerate(zip(pools.support, pools.query, strict=True)):
        vocab = frozenset().union(*(attributes[i] for i in np.concatenate([support, query])))
        vocabulary.append(vocab)
        for a in sorted(vocab):
            carried = sum(a in attributes[i] for i in support)
            lacking = sum(a not in attributes[i] for i in query)
            if carried >= n_s and lacking >= n_q:
                classes_of.setdefault(a, []).append(c)
    return FewstabIndex(tuple(sorted(classes_of)), {a: tuple(v) for a, v in classes_of.items()},
                        tuple(vocabulary))


def can_assign_classes(index: FewstabIndex, selected: Sequence[str]) -> bool:
    """True when every way i can get its own class, distinct from the others', eligible for
    `selected[i]` and for another selected attribute (a bipartite matching, Kuhn's algorithm);
    False means the reference's retries of this draw can never succeed."""
    options = []
    for i, own in enumerate(selected):
        others = {c for j, b in enumerate(selected) if j != i for c in index.classes_of[b]}
        options.append(sorted(set(index.classes_of[own]) & others))
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for c in options[i]:
            if c not in seen:
                seen.add(c)
                if c not in owner or place(owner[c], seen):
                    owner[c] = i
                    return True
        return False

    return all(place(i, set()) for i in range(len(selected)))


def compute_query_scores(indicators: np.ndarray) -> np.ndarray:
    """Reference score of each candidate query: sum_a log(E[x, a] * p_a + 1e-10), p_a the mean
    of column a. `indicators`: [n_candidates, n_attributes] of 0/1."""
    if indicators.shape[1] == 0:
        return np.zeros(indicators.shape[0])
    frequency = indicators.mean(axis=0)
    return np.log(indicators * frequency.reshape(1, -1) + SCORE_EPSILON).sum(axis=1)


def _indicators(images: np.ndarray, names: Sequence[str],
                attributes: Sequence[frozenset[str]]) -> np.ndarray:
    return np.array([[a in attributes[i] for a in names] for i in images.tolist()],
                    dtype=np.float64).reshape(len(images), len(names))


class _Thresholds:
    """The reference's relaxation state, kept across the retries of one task."""

    def __init__(self) -> None:
        self.support, self.query, self.query_failures = 0.0, 0.0, 0


def _draw_way(pools: ClassPools, attributes: Sequence[frozenset[str]], index: FewstabIndex,
              selected: list[str], i: int, taken: list[int], n_shots: int, n_queries: int,
              state: _Thresholds, rng: np.random.Generator
              ) -> tuple[int, np.ndarray, np.ndarray] | None:
    """Class, support and queries of way `i`, or None when this try fails."""
    own = selected[i]
    others_classes = {c for j, b in enumerate(selected) if j != i for c in index.classes_of[b]}
    remaining = sorted((set(index.classes_of[own]) & others_classes) - set(taken))
    if not remaining:
        return None
    c = remaining[int(rng.integers(len(remaining)))]
    others = [b for j, b in enumerate(selected) if j != i and b in index.vocabulary[c]]
    if not others:
        return None
    support_pool = pools.support[c]
    carries = _indicators(support_pool, [own], attributes)[:, 0] == 1
    crowded = _indicators(support_pool, others, attributes).sum(axis=1)
    candidates = support_pool[carries & (crowded <= state.support)]
    if len(candidates) < n_shots:
        state.support += SUPPORT_THRESHOLD_STEP
        return None
    state.support = 0.0
    support = rng.choice(candidates, n_shots, replace=False)
    query_pool = pools.query[c]
    lacks = _indicators(query_pool, [own], attributes)[:, 0] == 0
    biased = _indicators(query_pool, others, attributes).mean(axis=1) > state.query
    candidates = query_pool[lacks & biased]
    if len(candidates) < n_queries:
        state.query_failures += 1
        if state.query_failures == QUERY_FAILURES_BEFORE_ANY:
            state.query = -1.0
        return None
    state.query_failures, state.query = 0, 0.0
    rest = [a for a in index.attributes if a not in selected and a in index.vocabulary[c]]
    scores = compute_query_scores(_indicators(candidates, rest, attributes))
    return c, support, candidates[np.argsort(scores, kind="stable")[:n_queries]]


def sample_fewstab_episode(
    pools: ClassPools, attributes: Sequence[frozenset[str]], rng: np.random.Generator,
    dataset: str, n_ways: int, n_shots: int, n_queries: int, n_s: int, n_q: int,
    index: FewstabIndex | None = None,
) -> FewstabDraw:
    """Draw one attribute-biased episode (group 'fewstab-A') by the reference's rules.

    `index`: `compute_fewstab_index(pools, attributes, n_s, n_q)`, to skip recomputing it.
    Invariants: distinct a_i; every support image of way i carries a_i, every query image lacks
    it; support from the support pools, queries from the query pools.

    Raises:
        ValueError: fewer than `n_ways` eligible attributes, or no task after `MAX_TRIES`.
    """
    index = index or compute_fewstab_index(pools, attributes, n_s, n_q)
    if len(index.attributes) < n_ways:
        raise ValueError(
            f"Dataset {dataset!r}: {len(index.attributes)} attributes are carried by >= {n_s} "
            f"support-pool and lacking from >= {n_q} query-pool images of some class, expected "
            f">= n_ways={n_ways}; lower n_ways or use a dataset with more attribute annotations."
        )
    state = _Thresholds()
    draws = 0
    for tries in range(1, MAX_TRIES + 1):
        while True:
            draws += 1
            if draws > MAX_ATTRIBUTE_DRAWS:
                raise ValueError(
                    f"Dataset {dataset!r}: in {MAX_ATTRIBUTE_DRAWS} draws of {n_ways} of its "
                    f"{len(index.attributes)} eligible attributes, {tries - 1} could be served "
                    f"by {n_ways} distinct classes each eligible for its attribute and another "
                    f"drawn one (n_s={n_s}, n_q={n_q}); lower n_ways or n_shots, or use a "
                    "dataset with more attribute annotations."
                )
            picked = rng.choice(len(index.attributes), n_ways, replace=False)
            selected = [index.attributes[k] for k in picked.tolist()]
            if can_assign_classes(index, selected):
                break
        ways: list[tuple[int, np.ndarray, np.ndarray]] = []
        for i in range(n_ways):
            way = _draw_way(pools, attributes, index, selected, i, [w[0] for w in ways],
                            n_shots, n_queries, state, rng)
            if way is None:
                break
            ways.append(way)
        if len(ways) == n_ways:
            episode = build_episode(dataset, [w[0] for w in ways], [w[1] for w in ways],
                                    [w[2] for w in ways], rng, n_shots=n_shots,
                                    group="fewstab-A")
            return FewstabDraw(episode, tuple(selected), tries)
    raise ValueError(
        f"Dataset {dataset!r}: no FewSTAB task in {MAX_TRIES} tries (each way needs a class "
        f"eligible for its attribute and another selected one, {n_shots} support images with it "
        f"and {n_queries} query images without it); lower n_ways or use another dataset."
    )
