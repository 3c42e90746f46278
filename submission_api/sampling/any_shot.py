"""N-way k-shot episodes with the same k for every class: fixed, or any-way any-shot as in the
NeurIPS'22 Cross-Domain MetaDL challenge.

Draw order, as in the NeurIPS'22 kit's task generator: the number of ways, then the classes,
then the shots (capped by what the smallest chosen class can spare), then the images.
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
        for name, least in (("n_ways", 2), ("n_shots", 1)):
            value = getattr(self, name)
            if value is not None and value < least:
                raise ValueError(
                    f"TaskShape {name}={value}, expected None or an integer >= {least}."
                )
        if not 2 <= self.min_ways <= self.max_ways:
            raise ValueError(
                f"TaskShape ways {self.min_ways}..{self.max_ways}, expected 2 <= min <= max."
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
    """Classes able to give the fewest shots `shape` allows plus `shape.n_queries` queries."""
    support_cap, query_cap = compute_capacities(pools, shape.n_queries)
    need = shape.n_shots if shape.n_shots is not None else shape.min_shots
    return np.flatnonzero((query_cap >= shape.n_queries) & (support_cap >= need))


def sample_n_way_k_shot(
    pools: ClassPools,
    rng: np.random.Generator,
    dataset: str,
    shape: TaskShape = CROSS_DOMAIN_SHAPE,
    group: str = "test",
) -> Episode:
    """Draw one episode of `shape` from one dataset's pools.

    Invariants of the output: `n_ways` is `shape.n_ways` or in
    `min_ways..min(max_ways, eligible classes)`; every way has exactly `n_shots` support and
    `shape.n_queries` query images; `n_shots` is `shape.n_shots` or in
    `min_shots..min(max_shots, smallest chosen class's spare support)`; labels `0..n_ways-1`;
    support and query each shuffled; support and query drawn from the classes' pools.

    Raises:
        ValueError: fewer eligible classes than the ways asked for.
    """
    eligible = compute_eligible_classes(pools, shape)
    n_ways = _sample_ways(eligible, shape, dataset, rng)
    class_ids = rng.choice(eligible, n_ways, replace=False)
    support_cap, _ = compute_capacities(pools, shape.n_queries)
    if shape.n_shots is not None:
        n_shots = shape.n_shots
    else:
        top = min(shape.max_shots, int(support_cap[class_ids].min()))
        n_shots = int(rng.integers(shape.min_shots, top + 1))
    drawn = [sample_class_images(pools, c, n_shots, shape.n_queries, rng) for c in class_ids]
    return build_episode(
        dataset,
        class_ids,
        [s for s, _ in drawn],
        [q for _, q in drawn],
        rng,
        n_shots=n_shots,
        group=group,
    )


def _sample_ways(
    eligible: np.ndarray, shape: TaskShape, dataset: str, rng: np.random.Generator
) -> int:
    need = shape.n_ways if shape.n_ways is not None else shape.min_ways
    if len(eligible) < need:
        shots = shape.n_shots if shape.n_shots is not None else shape.min_shots
        raise ValueError(
            f"Dataset {dataset!r} has {len(eligible)} classes able to give {shots} shot(s) + "
            f"{shape.n_queries} queries, expected at least {need}; use a dataset with more "
            "images per class, or ask fewer ways, shots or queries."
        )
    if shape.n_ways is not None:
        return shape.n_ways
    top = min(shape.max_ways, len(eligible))
    return int(rng.integers(shape.min_ways, top + 1))


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
