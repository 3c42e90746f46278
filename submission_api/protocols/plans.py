"""The three functions every run uses, locally and on the platform: which episodes a run tests,
and which images the participant may see at meta-train and meta-valid time.

Test episodes depend only on the phase's `test_seed`, the dataset name and the params — never
on the run — so every run of a submission meets the same tasks and its runs differ only in the
participant-side seed (MetaDL practice: "a different ingestion seed while the scoring seed
remains the same"); a phase with `run_test_tasks: fresh` gives each run its own test seed
instead (`compute_run_test_seed`, the NeurIPS'22 kit's practice). The platform derives
`test_seed` from a server secret (`server.services.seeds`); neither participants nor sandboxes
ever see it. For each test dataset (and id-ood group) the plan takes the pools of
`params.test_pools` (`sampling.pools`: by default each task draws support and query afresh from
the whole class; `per_run` draws disjoint pools once, so no query image appears with its label
in any task of the run) from
`make_rng(test_seed, "pools", group, dataset)`, then every episode of that dataset from the same
generator. FewSTAB's tasks draw from whole classes by default too, as the reference does.
Episodes come dataset after dataset, in the order of the split (or of `params.datasets`).
Meta-dataset keeps exactly `tasks_per_dataset` episodes per dataset (each from one dataset),
rather than drawing each episode's dataset at random, so per-dataset scores rest on the same
count in every run, as in Triantafillou et al.'s 600 test episodes per dataset.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from submission_api.protocols.fewstab import compute_fewstab_index, sample_fewstab_episode
from submission_api.protocols.id_ood import plan_id_ood_groups, plan_id_ood_view
from submission_api.protocols.params import ProtocolParams
from submission_api.protocols.splits import compute_images_of_classes
from submission_api.protocols.within_domain import (
    compute_within_domain_splits,
    plan_within_domain_tests,
)
from submission_api.sampling.any_shot import sample_cross_domain_episode, sample_fixed_episode
from submission_api.sampling.episode import ClassPools, Episode, check_episode
from submission_api.sampling.meta_dataset import (
    MD_MAX_NUM_QUERY,
    compute_md_query_pool_size,
    sample_meta_dataset_episode,
)
from submission_api.sampling.pools import sample_test_pools
from submission_api.sampling.seeds import make_rng

if TYPE_CHECKING:
    from submission_api.data.collection import Collection

CROSS_DOMAIN_QUERIES = 20
"""NeurIPS'22 queries per class; sizes the cross-domain query pools."""


def _get(collection: Collection, name: str) -> Any:
    if name not in collection.datasets:
        raise ValueError(
            f"Dataset {name!r} is not in collection {collection.name!r} (has "
            f"{sorted(collection.datasets)}); fix the phase's datasets or meta_splits.txt."
        )
    return collection.datasets[name]


def _split(collection: Collection, split: str) -> list[str]:
    return list(collection.splits.get(split, []))


def _test_names(params: ProtocolParams, collection: Collection) -> list[str]:
    if params.datasets is not None:
        return list(params.datasets)
    if params.name == "fewstab":
        # Attribute-annotated datasets are rare; any of them outside meta-train and meta-valid
        # can be tested (a meta-valid one reaches the participant labelled, in that view).
        seen = set(_split(collection, "meta-train")) | set(_split(collection, "meta-valid"))
        return sorted(n for n, ds in collection.datasets.items()
                      if ds.attributes is not None and n not in seen)
    return _split(collection, "meta-test")


def _queries(params: ProtocolParams) -> int:
    if params.name == "cross-domain":
        return CROSS_DOMAIN_QUERIES
    return MD_MAX_NUM_QUERY if params.name == "meta-dataset" else params.shape[2]


def _draw(params: ProtocolParams, pools: ClassPools, rng: np.random.Generator, ds: Any,
          group: str) -> Episode:
    if params.name == "cross-domain":
        return sample_cross_domain_episode(pools, rng, ds.name, group)
    if params.name == "meta-dataset":
        supers = None
        if ds.name in params.hierarchical_datasets:
            if ds.super_categories is None:
                raise ValueError(
                    f"Dataset {ds.name!r} is listed in hierarchical_datasets but has no "
                    "super-category column; add one to its labels.csv or drop it from the list."
                )
            supers = ds.super_categories
        return sample_meta_dataset_episode(pools, rng, ds.name, supers, group)
    return sample_fixed_episode(pools, rng, ds.name, *params.shape, group)


def _plan_dataset(params: ProtocolParams, ds: Any, seed: int,
                  groups: tuple[str, ...], allowed: np.ndarray | None = None) -> list[Episode]:
    """`tasks_per_dataset` episodes of each group, from the pools of `params.test_pools`."""
    rng = make_rng(seed, "pools", groups[0], ds.name)
    pool_size = compute_md_query_pool_size if params.name == "meta-dataset" else None
    pools = sample_test_pools(params.pools, ds.labels, len(ds.class_names), _queries(params),
                              rng, allowed, pool_size)
    index = (compute_fewstab_index(pools, ds.attributes, *params.fewstab_thresholds)
             if "fewstab-A" in groups else None)
    episodes = []
    for group in groups:
        for _ in range(params.tasks):
            if group == "fewstab-A":
                episodes.append(sample_fewstab_episode(
                    pools, ds.attributes, rng, ds.name, *params.shape,
                    *params.fewstab_thresholds, index).episode)
            else:
                episodes.append(_draw(params, pools, rng, ds, group))
    return episodes


def compute_run_test_seed(params: ProtocolParams, test_seed: int, participant_seed: int) -> int:
    """The test seed a run plans with: the phase's under `run_test_tasks: shared` (every run
    meets the same tasks), else 63 bits of SHA-256 of (the phase's, the run's participant seed):
    as secret as the phase's, and a new draw of test tasks per run (NeurIPS'22 kit)."""
    seed = _check_seed(test_seed)
    if params.run_test_tasks == "shared":
        return seed
    message = f"metadl-arena/run-test-seed/v1|{seed}|{int(participant_seed)}".encode()
    return int.from_bytes(hashlib.sha256(message).digest()[:8], "big") >> 1


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(
            f"test_seed={seed!r}, expected one non-negative int (the phase's test seed; the "
            "run's participant seed must not enter test-task sampling)."
        )
    return int(seed)


def plan_test_episodes(params: ProtocolParams, collection: Collection,
                       test_seed: int) -> list[Episode]:
    """Every test episode of a phase: the same for every run (module docstring: seeding, order).

    Groups: 'test'; id-ood 'BaseGen', 'ValGen', 'NovelGen' (`id_ood`'s docstring); fewstab
    'fewstab-A' then 'fewstab-R' (random tasks of the same shape, same pools) per dataset.
    """
    seed = _check_seed(test_seed)
    check_roles(params, collection)
    episodes = _plan(params, collection, seed)
    for episode in episodes:  # every task a run prepares satisfies Episode's invariants
        check_episode(episode)
    return episodes


def check_roles(params: ProtocolParams, collection: Collection) -> None:
    """Refuse a test dataset that is also meta-train or meta-valid (it would be tested on
    classes the participant trained or validated on); within-domain splits classes instead.

    Raises:
        ValueError: naming the datasets in two roles.
    """
    if params.name == "within-domain" or (params.name == "id-ood"
                                          and params.id_ood_novel == "same-benchmark"):
        return  # these test classes of seen datasets, never shown to the participant
    seen = set(_split(collection, "meta-train")) | set(_split(collection, "meta-valid"))
    tested = set(_test_names(params, collection)) if params.name != "id-ood" else set(
        params.datasets if params.datasets is not None else _split(collection, "meta-test"))
    both = sorted(seen & tested)
    if both:
        raise ValueError(
            f"Datasets {both} are test datasets and also meta-train or meta-valid in collection "
            f"{collection.name!r}; expected each in one role; fix the phase's data or "
            "meta_splits.txt (within-domain is the protocol that tests classes of seen datasets)."
        )


def _plan(params: ProtocolParams, collection: Collection, seed: int) -> list[Episode]:
    if params.name == "id-ood":
        return _plan_id_ood(params, collection, seed)
    episodes: list[Episode] = []
    if params.name == "within-domain":
        for name, split in plan_within_domain_tests(params, collection).items():
            ds = collection.datasets[name]
            allowed = compute_images_of_classes(ds.labels, split[2])
            episodes += _plan_dataset(params, ds, seed, ("test",), allowed)
        return episodes
    for name in _test_names(params, collection):
        ds = _get(collection, name)
        if params.name == "fewstab":
            episodes += _plan_fewstab(params, ds, seed, explicit=params.datasets is not None)
        else:
            episodes += _plan_dataset(params, ds, seed, ("test",))
    if params.name == "fewstab" and not episodes:
        raise _no_fewstab_dataset(collection)
    return episodes


def _no_fewstab_dataset(collection: Collection) -> ValueError:
    """Why fewstab found nothing to test: no dataset is annotated, or every annotated one is
    meta-train or meta-valid (seen labelled by the participant, so never tested)."""
    roles = {name: role for role in ("meta-train", "meta-valid")
             for name in _split(collection, role)}
    seen = sorted(n for n, ds in collection.datasets.items()
                  if ds.attributes is not None and n in roles)
    if seen:
        where = ", ".join(f"{n!r} ({roles[n]})" for n in seen)
        return ValueError(
            f"The attribute-annotated datasets of collection {collection.name!r}, {where}, are "
            "all meta-train or meta-valid: the participant sees them labelled, so fewstab tests "
            "none of them; move one out of those splits (meta_splits.txt, or the phase's "
            "data.meta_train / data.meta_valid), or add an annotated dataset in no split."
        )
    return ValueError(
        f"No test dataset of collection {collection.name!r} has attribute annotations; "
        "fewstab expected at least one; add an 'attributes' column to labels.csv."
    )


def _plan_fewstab(params: ProtocolParams, ds: Any, seed: int,
                  explicit: bool) -> list[Episode]:
    if ds.attributes is None:
        if explicit:
            raise ValueError(
                f"Dataset {ds.name!r} has no attribute annotations, expected them for fewstab; "
                "add an 'attributes' column to its labels.csv or drop it from the phase."
            )
        return []
    return _plan_dataset(params, ds, seed, ("fewstab-A", "fewstab-R"))


def _plan_id_ood(params: ProtocolParams, collection: Collection, seed: int) -> list[Episode]:
    episodes: list[Episode] = []
    for group, name, allowed in plan_id_ood_groups(params, collection):
        episodes += _plan_dataset(params, _get(collection, name), seed, (group,), allowed)
    return episodes


def plan_meta_train_view(params: ProtocolParams, collection: Collection) -> dict[str, np.ndarray]:
    """Dataset name -> sorted image indices the participant may see at meta-train.

    within-domain: the training classes of every dataset; id-ood: `id_ood.plan_id_ood_view`;
    otherwise every image of the meta-train datasets.
    """
    if params.name == "within-domain":
        return _within_view(params, collection, part=0)
    if params.name == "id-ood":
        return plan_id_ood_view(params, collection, "train")
    return {name: np.arange(len(_get(collection, name).labels), dtype=np.int64)
            for name in _split(collection, "meta-train")}


def plan_meta_valid_view(params: ProtocolParams, collection: Collection) -> dict[str, np.ndarray]:
    """Dataset name -> image indices for the meta-valid generator: within-domain, the valid
    classes of every dataset; id-ood: `id_ood.plan_id_ood_view`; otherwise every image of the
    'meta-valid' datasets (if any)."""
    if params.name == "within-domain":
        return _within_view(params, collection, part=1)
    if params.name == "id-ood":
        return plan_id_ood_view(params, collection, "valid")
    return {name: np.arange(len(_get(collection, name).labels), dtype=np.int64)
            for name in _split(collection, "meta-valid")}


def _within_view(params: ProtocolParams, collection: Collection,
                 part: int) -> dict[str, np.ndarray]:
    """Images of the train (part 0) or valid (1) classes of every within-domain dataset, tested
    or not (`within_domain`'s docstring says why)."""
    view = {}
    for name, split in compute_within_domain_splits(params, collection).items():
        images = compute_images_of_classes(collection.datasets[name].labels, split[part])
        if images.size:
            view[name] = images
    return view
