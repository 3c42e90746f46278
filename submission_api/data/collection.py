"""A collection: its compiled datasets and its meta-train / meta-valid / meta-test splits.

This is what protocols plan tasks from, locally and on the platform.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from submission_api.data.checks import check_collection
from submission_api.data.compiled import CompiledDataset
from submission_api.data.compiler import compile_dataset
from submission_api.data.metaalbum import list_dataset_dirs, read_splits
from submission_api.data.problems import DataProblemsError


@dataclass(frozen=True)
class Collection:
    """Compiled datasets by folder name, and the splits of `info/meta_splits.txt`.

    `datasets` holds every dataset folder of the collection (or those asked for), including
    ones listed in no split (e.g. a FewSTAB dataset a phase names explicitly).
    """

    name: str
    datasets: dict[str, CompiledDataset]
    splits: dict[str, list[str]]


def load_collection(collection_dir: Path, cache_dir: Path,
                    only: Iterable[str] | None = None) -> Collection:
    """Compile (or reuse) the datasets of a collection and read its splits.

    Args:
        collection_dir: datasets plus `info/meta_splits.txt`.
        cache_dir: the compiled cache.
        only: dataset names to compile; default all dataset folders.
    Raises:
        DataProblemsError: the splits are invalid or name unknown datasets (then the whole
            collection is checked, so the error lists every problem).
    """
    collection_dir = Path(collection_dir)
    splits, problems = read_splits(collection_dir)
    present = {d.name: d for d in list_dataset_dirs(collection_dir)}
    wanted = sorted(present) if only is None else list(only)
    named = ({n for names in splits.values() for n in names} if splits else set()) | set(wanted)
    if splits is None or not named <= set(present):
        raise DataProblemsError(f"Cannot load collection {collection_dir}",
                                problems or check_collection(collection_dir, 1))
    datasets = {n: compile_dataset(present[n], cache_dir) for n in wanted}
    return Collection(name=collection_dir.name, datasets=datasets, splits=splits)


def with_phase_splits(collection: Collection, splits: dict[str, list[str]]) -> Collection:
    """The collection with a phase's own splits instead of its `meta_splits.txt`: a phase
    names which datasets play which role (`arena run --protocol-file`), as the platform's
    planner reads them; a split it does not give (a secret phase's meta-test) stays the
    collection's. Raises ValueError naming the datasets the folder lacks."""
    missing = sorted({n for names in splits.values() for n in names} - set(collection.datasets))
    if missing:
        raise ValueError(f"the phase uses dataset(s) {', '.join(missing)}, which the collection "
                         f"{collection.name!r} does not have (it has "
                         f"{', '.join(sorted(collection.datasets))}); pass --data with the "
                         "phase's sample data (the competition page's Get-started box links it)")
    merged = {**collection.splits, **{k: list(v) for k, v in splits.items()}}
    return Collection(name=collection.name, datasets=collection.datasets, splits=merged)
