"""Task samplers: episodes as image indices (never pixels) drawn from per-class pools by pure
functions of a `numpy.random.Generator`, their materialisation into Tasks, and the meta-train /
meta-valid generators. See docs/internals.md, 'Sampling'.
"""

from typing import TYPE_CHECKING, Any

from submission_api.sampling.any_shot import (
    CROSS_DOMAIN_SHAPE,
    TaskShape,
    compute_eligible_classes,
    sample_cross_domain_episode,
    sample_fixed_episode,
    sample_n_way_k_shot,
)
from submission_api.sampling.episode import (
    ClassPools,
    Episode,
    build_episode,
    check_episode,
    compute_episodes_digest,
)
from submission_api.sampling.meta_dataset import sample_meta_dataset_episode
from submission_api.sampling.pools import (
    compute_class_members,
    compute_query_pool_size,
    compute_shared_pools,
    sample_disjoint_pools,
)
from submission_api.sampling.seeds import make_rng

if TYPE_CHECKING:
    from submission_api.sampling.materialize import materialize_batch, materialize_task

__all__ = [
    "CROSS_DOMAIN_SHAPE",
    "ClassPools",
    "Episode",
    "TaskShape",
    "build_episode",
    "check_episode",
    "compute_class_members",
    "compute_eligible_classes",
    "compute_episodes_digest",
    "compute_query_pool_size",
    "compute_shared_pools",
    "make_rng",
    "materialize_batch",
    "materialize_task",
    "sample_cross_domain_episode",
    "sample_disjoint_pools",
    "sample_fixed_episode",
    "sample_meta_dataset_episode",
    "sample_n_way_k_shot",
]


def __getattr__(name: str) -> Any:
    """The materialisers on first use: they import torch, which the trusted side (it samples
    episodes, never pixels) does not need."""
    if name in ("materialize_batch", "materialize_task"):
        from submission_api.sampling import materialize

        return getattr(materialize, name)
    raise AttributeError(f"module 'submission_api.sampling' has no attribute {name!r}")
