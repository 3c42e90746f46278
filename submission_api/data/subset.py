"""Writing a compiled entry that holds only some images of another one.

The worker builds the participant's meta-train view this way, so held-out images (id-ood
protocol) or test classes (within-domain) are physically absent from what the sandbox mounts,
not merely skipped by an index.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from submission_api.data.archive import remove_tree
from submission_api.data.compiled import (
    CompiledDataError,
    CompiledDataset,
    EntryMeta,
    create_image_file,
    finalize_entry,
    new_staging_dir,
    open_compiled,
    publish_entry,
    read_manifest,
)

_COPY_CHUNK = 512


def write_compiled_subset(dataset: CompiledDataset, image_indices: np.ndarray, out_root: Path,
                          name: str | None = None) -> CompiledDataset:
    """Write a new compiled entry at `out_root` holding only `image_indices` of `dataset`.

    Invariants of the output: image `j` is image `sorted(image_indices)[j]` of `dataset`; only
    classes with at least one kept image remain, re-indexed `0..C'-1` in sorted name order (so
    names of dropped classes do not leak); attributes and super-categories follow.

    Args:
        dataset: the source entry.
        image_indices: int indices into `dataset`, unique, at least one.
        out_root: the new entry folder; must not exist yet (its parent is created).
        name: the dataset name recorded in the manifest; default `dataset.name`.
    Raises:
        ValueError: indices empty, repeated or out of range. FileExistsError: `out_root` exists.
    """
    idx = _check_indices(np.asarray(image_indices), len(dataset.labels))
    out_root = Path(out_root)
    if out_root.exists():
        raise FileExistsError(f"{out_root} already exists; write the subset to a new folder.")
    out_root.parent.mkdir(parents=True, exist_ok=True)
    staging = new_staging_dir(out_root.parent)
    try:
        images = create_image_file(staging, len(idx))
        for start in range(0, len(idx), _COPY_CHUNK):
            images[start:start + _COPY_CHUNK] = dataset.images[idx[start:start + _COPY_CHUNK]]
        images.flush()
        del images
        finalize_entry(staging, _subset_meta(dataset, idx, name))
        publish_entry(staging, out_root)
    finally:
        if staging.exists():
            remove_tree(staging)
    return open_compiled(out_root)


def _check_indices(idx: np.ndarray, n: int) -> np.ndarray:
    if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"expected a non-empty 1-D integer array of image indices, got "
                         f"{idx.dtype} {list(idx.shape)}; pass e.g. np.arange(n) or a class pool.")
    unique = np.unique(idx)
    if len(unique) != len(idx) or unique[0] < 0 or unique[-1] >= n:
        raise ValueError(f"image indices must be unique and in 0..{n - 1}; got {len(idx)} "
                         f"indices ({len(unique)} unique) spanning {idx.min()}..{idx.max()}. "
                         "Deduplicate them with np.unique and check their source dataset.")
    return unique.astype(np.int64)


def _subset_meta(dataset: CompiledDataset, idx: np.ndarray, name: str | None) -> EntryMeta:
    kept_classes, labels = np.unique(dataset.labels[idx], return_inverse=True)
    supers, super_names = None, None
    if dataset.super_categories is not None:
        all_names = read_manifest(dataset.root).get("super_category_names")
        kept_supers, supers = np.unique(dataset.super_categories[kept_classes],
                                        return_inverse=True)
        if all_names is not None:
            super_names = tuple(all_names[int(s)] for s in kept_supers)
    if len(labels) != len(idx):
        raise CompiledDataError(f"{dataset.root}: labels do not match the images; recompile it.")
    return EntryMeta(
        name=name or dataset.name, labels=labels.astype(np.int64),
        class_names=tuple(dataset.class_names[int(c)] for c in kept_classes),
        super_categories=None if supers is None else supers.astype(np.int64),
        super_category_names=super_names,
        attributes=None if dataset.attributes is None
        else tuple(dataset.attributes[int(i)] for i in idx),
        extra={"derived_from": dataset.content_hash},
    )
