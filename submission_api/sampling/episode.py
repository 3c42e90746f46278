"""The two index-level value objects every sampler produces or consumes: an `Episode` (a task as
image indices, before pixels) and `ClassPools` (which images of each class may serve as support
or as query).

Samplers never touch pixels: an episode is cheap to draw, to store in a bundle, to digest for
determinism checks, and is turned into tensors only by `materialize.py`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EPISODE_GROUPS = ("test", "BaseGen", "ValGen", "NovelGen", "fewstab-A", "fewstab-R")
"""Report sections an episode may belong to (docs/internals.md, `Episode.group`)."""


@dataclass(frozen=True)
class Episode:
    """A task as image indices into one dataset.

    Invariants (checked by `check_episode`): `support_labels` and `query_labels` lie in
    `0..n_ways-1`, label `j` means dataset class `class_ids[j]`, every way has at least one
    support image, and no image index is both support and query.
    """

    dataset: str
    class_ids: np.ndarray  # int64 [n_ways], dataset class indices
    support_idx: np.ndarray  # int64 [n_support], image indices into the dataset
    support_labels: np.ndarray  # int64 [n_support], 0..n_ways-1
    query_idx: np.ndarray  # int64 [n_query]
    query_labels: np.ndarray  # int64 [n_query], 0..n_ways-1
    n_ways: int
    n_shots: int  # the common k; for variable shots, the median k rounded
    group: str = "test"


@dataclass(frozen=True)
class ClassPools:
    """Which images of each class (indexed by dataset class id) may be support / query.

    `disjoint=False` (meta-train): `support[c] is query[c]`, and a sampler draws support and
    query of one task without overlap from that single pool. `disjoint=True` (a meta-test run):
    `support[c]` and `query[c]` share no index, so no query image is ever shown with its label.
    """

    support: tuple[np.ndarray, ...]
    query: tuple[np.ndarray, ...]
    disjoint: bool

    @property
    def n_classes(self) -> int:
        return len(self.support)


def build_episode(
    dataset: str,
    class_ids: Sequence[int] | np.ndarray,
    support_per_class: Sequence[np.ndarray],
    query_per_class: Sequence[np.ndarray],
    rng: np.random.Generator,
    *,
    n_shots: int | None = None,
    group: str = "test",
    shot_major: bool = False,
) -> Episode:
    """Label way `j` as `j`, then shuffle support and query each (one permutation each).

    Args:
        support_per_class / query_per_class: image indices of way `j` at position `j`.
        n_shots: the common k; default: the median support count, rounded.
        shot_major: lay the images out before the shuffle as the NeurIPS'22 kit stacks them,
            first image of every way, then the second, ... (equal counts per way only), so that
            the same permutation picks the same images; default way after way.

    Returns:
        An Episode satisfying the invariants of `Episode`.
    """
    support_idx, support_labels = _stack(support_per_class, rng, shot_major)
    query_idx, query_labels = _stack(query_per_class, rng, shot_major)
    if n_shots is None:
        n_shots = int(np.round(np.median([len(s) for s in support_per_class])))
    return Episode(
        dataset=dataset,
        class_ids=np.asarray(class_ids, dtype=np.int64),
        support_idx=support_idx,
        support_labels=support_labels,
        query_idx=query_idx,
        query_labels=query_labels,
        n_ways=len(support_per_class),
        n_shots=int(n_shots),
        group=group,
    )


def _stack(per_class: Sequence[np.ndarray], rng: np.random.Generator,
           shot_major: bool = False) -> tuple[np.ndarray, ...]:
    if shot_major:  # the kit: np.stack(per class).T.reshape(-1), labels arange(N) repeated
        idx = np.stack([np.asarray(a, dtype=np.int64) for a in per_class]).T.reshape(-1)
        labels = np.tile(np.arange(len(per_class), dtype=np.int64), len(per_class[0]))
    else:
        idx = np.concatenate([np.asarray(a, dtype=np.int64) for a in per_class])
        labels = np.concatenate(
            [np.full(len(a), j, dtype=np.int64) for j, a in enumerate(per_class)]
        )
    order = rng.permutation(len(idx))
    return idx[order], labels[order]


def check_episode(episode: Episode) -> None:
    """Raise ValueError if `episode` breaks an invariant of `Episode`."""
    n = episode.n_ways
    for name in ("support_labels", "query_labels"):
        labels = getattr(episode, name)
        if labels.size and (labels.min() < 0 or labels.max() >= n):
            raise ValueError(
                f"Episode of {episode.dataset!r}: {name} range {labels.min()}..{labels.max()}, "
                f"expected 0..{n - 1}; build episodes with build_episode."
            )
    missing = set(range(n)) - set(episode.support_labels.tolist())
    if missing or len(episode.class_ids) != n:
        raise ValueError(
            f"Episode of {episode.dataset!r}: ways {sorted(missing)} have no support image "
            f"(class_ids has {len(episode.class_ids)} entries, n_ways={n}); expected every "
            "way to have >= 1 shot; check the sampler's eligibility rule."
        )
    shared = np.intersect1d(episode.support_idx, episode.query_idx)
    if shared.size:
        raise ValueError(
            f"Episode of {episode.dataset!r}: images {shared[:5].tolist()} are both support and "
            "query; expected disjoint sets; draw support and query without overlap."
        )
    if episode.group not in EPISODE_GROUPS:
        raise ValueError(
            f"Episode group {episode.group!r}, expected one of {EPISODE_GROUPS}."
        )


def compute_episodes_digest(episodes: Sequence[Episode]) -> str:
    """A sha256 over every index and label array: equal digests mean identical episodes."""
    digest = hashlib.sha256()
    for ep in episodes:
        digest.update(f"{ep.dataset}|{ep.n_ways}|{ep.n_shots}|{ep.group}|".encode())
        for arr in (ep.class_ids, ep.support_idx, ep.support_labels, ep.query_idx,
                    ep.query_labels):
            digest.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
            digest.update(b"/")
    return digest.hexdigest()
