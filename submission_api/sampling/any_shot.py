"""N-way k-shot episodes with the same k for every class: fixed, or any-way any-shot as in the
NeurIPS'22 Cross-Domain MetaDL challenge.

Draw for draw as the NeurIPS'22 kit's `CompetitionDataLoader.create_support_and_query_sets`
(cdmetadl/ingestion/data_generator.py, with a NumPy Generator in place of its RandomState): the
number of ways, then the shots — k bounded by the smallest class of the dataset minus the
queries (`min_examples_per_class - query_size`), so drawn before the classes — then the classes
(`permutation(classes)[:n_way]`), then `k + q` images of each class (the first k support), laid
out shot-major as the kit stacks them, then one permutation of the support and one of the query.
The kit's `prepare_task_config` range rules are kept (`compute_way_range`, `compute_shot_range`).

Deliberate differences, named in the tutorial: a class with too few images for a task (shared
pools: fewer than q + 1; a meta-test run: a query pool below q) is left out of the dataset's
classes, where the kit would fail on it; a fixed N or k larger than the dataset allows is
refused (a dataset that cannot serve it is not drawn), where the kit lowers it silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from submission_api.sampling.episode import ClassPools, Episode, build_episode
from submission_api.sampling.pools import compute_capacities, sample_class_images


@dataclass(frozen=True)
class TaskShape:
    """Ways, shots and queries of a task; `None` ways/shots mean 'any in min..max'.

    Same meaning as the NeurIPS'22 kit's `N, min_N, max_N, k, min_k, max_k,
    query_images_per_class`.
    """

    n_ways: int | None = None
    min_ways: int = 2
    max_ways: int = 20
    n_shots: int | None = None
    min_shots: int = 1
    max_shots: int = 20
    n_queries: int = 20

    def __post_init__(self) -> None:
        for name, least in (("n_ways", 2), ("n_shots", 1)):  # the kit's own bounds
            value = getattr(self, name)
            if value is not None and value < least:
                raise ValueError(
                    f"TaskShape {name}={value}, expected None or an integer >= {least}."
                )
        if not 1 <= self.min_ways <= self.max_ways:  # kit: min_N >= 1 (a 1-way task is legal)
            raise ValueError(
                f"TaskShape ways {self.min_ways}..{self.max_ways}, expected 1 <= min <= max."
            )
        if not 1 <= self.min_shots <= self.max_shots:
            raise ValueError(
                f"TaskShape shots {self.min_shots}..{self.max_shots}, expected 1 <= min <= max."
            )
        if self.n_queries < 1:
            raise ValueError(f"TaskShape n_queries={self.n_queries}, expected >= 1.")


CROSS_DOMAIN_SHAPE = TaskShape(None, 2, 20, None, 1, 20, 20)
"""NeurIPS'22 Cross-Domain MetaDL meta-test tasks: N ~ U{2..20}, k ~ U{1..20}, 20 queries per
class (the kit's `test_generator_config`)."""


def compute_eligible_classes(pools: ClassPools, shape: TaskShape) -> np.ndarray:
    """Classes able to give `shape.n_queries` queries and the fixed `shape.n_shots` (or one shot
    when shots range: the kit bounds k by the smallest class instead of dropping classes)."""
    support_cap, query_cap = compute_capacities(pools, shape.n_queries)
    need = shape.n_shots if shape.n_shots is not None else 1
    return np.flatnonzero((query_cap >= shape.n_queries) & (support_cap >= need))


def compute_way_range(shape: TaskShape, n_classes: int) -> tuple[int, int]:
    """(low, high) of the ways, as the kit's `prepare_task_config`: high = min(max_N, classes);
    when min_N exceeds it, low = max(2, high - (max_N - min_N)). Fixed N: (N, N)."""
    if shape.n_ways is not None:
        return shape.n_ways, shape.n_ways
    high = min(shape.max_ways, n_classes)
    if shape.min_ways > high:
        return max(2, high - (shape.max_ways - shape.min_ways)), high
    return shape.min_ways, high


def compute_shot_range(shape: TaskShape, spare: int) -> tuple[int, int]:
    """(low, high) of the shots given `spare`, the fewest support images a class of the dataset
    can give (kit: `min_examples_per_class - query_size`), same rule as `compute_way_range`."""
    if shape.n_shots is not None:
        return shape.n_shots, shape.n_shots
    high = min(shape.max_shots, spare)
    if shape.min_shots > high:
        return max(1, high - (shape.max_shots - shape.min_shots)), high
    return shape.min_shots, high


def check_can_serve(pools: ClassPools, shape: TaskShape, dataset: str) -> np.ndarray:
    """The eligible classes, or a clear error when they cannot make one task of `shape`."""
    eligible = compute_eligible_classes(pools, shape)
    low, high = compute_way_range(shape, len(eligible))
    if low > high or len(eligible) < max(low, 1):
        shots = shape.n_shots if shape.n_shots is not None else 1
        need = shape.n_ways if shape.n_ways is not None else min(shape.min_ways, 2)
        raise ValueError(
            f"Dataset {dataset!r} has {len(eligible)} classes able to give {shots} shot(s) + "
            f"{shape.n_queries} queries, expected at least {need}; use a dataset with more "
            "images per class, or ask fewer ways, shots or queries."
        )
    return eligible


def sample_n_way_k_shot(
    pools: ClassPools,
    rng: np.random.Generator,
    dataset: str,
    shape: TaskShape = CROSS_DOMAIN_SHAPE,
    group: str = "test",
) -> Episode:
    """Draw one episode of `shape` from one dataset's pools (draw order: module docstring).

    Invariants of the output: `n_ways` in `compute_way_range(shape, eligible classes)`; every
    way has exactly `n_shots` support and `shape.n_queries` query images; `n_shots` in
    `compute_shot_range(shape, fewest support images of an eligible class)`; labels
    `0..n_ways-1`; support and query each shuffled, drawn from the classes' pools.

    Raises:
        ValueError: the eligible classes cannot make one task of `shape`.
    """
    eligible = check_can_serve(pools, shape, dataset)
    low, high = compute_way_range(shape, len(eligible))
    n_ways = low if shape.n_ways is not None else int(rng.integers(low, high + 1))
    support_cap, _ = compute_capacities(pools, shape.n_queries)
    k_low, k_high = compute_shot_range(shape, int(support_cap[eligible].min()))
    n_shots = k_low if shape.n_shots is not None else int(rng.integers(k_low, k_high + 1))
    class_ids = eligible[rng.permutation(len(eligible))[:n_ways]]
    drawn = [sample_class_images(pools, c, n_shots, shape.n_queries, rng) for c in class_ids]
    return build_episode(
        dataset,
        class_ids,
        [s for s, _ in drawn],
        [q for _, q in drawn],
        rng,
        n_shots=n_shots,
        group=group,
        shot_major=True,
    )


def sample_cross_domain_episode(
    pools: ClassPools, rng: np.random.Generator, dataset: str, group: str = "test"
) -> Episode:
    """NeurIPS'22 any-way any-shot episode (`CROSS_DOMAIN_SHAPE`)."""
    return sample_n_way_k_shot(pools, rng, dataset, CROSS_DOMAIN_SHAPE, group)


def sample_fixed_episode(
    pools: ClassPools,
    rng: np.random.Generator,
    dataset: str,
    n_ways: int,
    n_shots: int,
    n_queries: int,
    group: str = "test",
) -> Episode:
    """Fixed N-way k-shot q-query episode."""
    shape = TaskShape(n_ways, 2, max(2, n_ways), n_shots, 1, n_shots, n_queries)
    return sample_n_way_k_shot(pools, rng, dataset, shape, group)
