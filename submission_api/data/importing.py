"""Importing a Meta-Album dataset, as distributed (zip or folder), into a collection.

The dataset is checked before anything lands in the collection, and it arrives there by a
rename from a hidden staging folder, so a collection never holds half a dataset.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

from submission_api.data.archive import extract_zip_safely, remove_tree
from submission_api.data.checks import DEFAULT_MIN_IMAGES_PER_CLASS, check_dataset
from submission_api.data.metaalbum import (
    INFO_FILE,
    SPLIT_NAMES,
    SPLITS_FILE,
    read_splits,
    write_splits,
)
from submission_api.data.problems import DataProblemsError, Problem

_IGNORED_TOP_LEVEL = {"__MACOSX", ".DS_Store"}


def find_dataset_root(extracted: Path) -> tuple[Path | None, list[Problem]]:
    """The dataset folder inside an extracted zip: the top itself or its single sub-folder."""
    if (extracted / INFO_FILE).is_file():
        return extracted, []
    entries = [p for p in extracted.iterdir() if p.name not in _IGNORED_TOP_LEVEL]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / INFO_FILE).is_file():
        return entries[0], []
    found = sorted(p.name for p in entries)
    return None, [Problem(extracted.name, f"no info.json at the top of the archive or in a single "
                          f"top-level folder (found {found}).",
                          "Zip one Meta-Album dataset folder (info.json, labels.csv, images/).")]


def check_archive(archive: Path,
                  min_images_per_class: int = DEFAULT_MIN_IMAGES_PER_CLASS) -> list[Problem]:
    """Every problem of a dataset zip: unsafe members first, then the dataset inside."""
    with tempfile.TemporaryDirectory(prefix="arena-check-") as tmp:
        try:
            extract_zip_safely(archive, Path(tmp))
        except DataProblemsError as exc:
            return exc.problems
        root, problems = find_dataset_root(Path(tmp))
        return problems if root is None else check_dataset(root, min_images_per_class)


def _load_or_new_splits(collection_dir: Path, split: str | None) -> dict[str, list[str]]:
    if split is not None and split not in SPLIT_NAMES:
        raise ValueError(f"split {split!r} is unknown; expected one of {list(SPLIT_NAMES)} or "
                         "None. Pass --split meta-train, meta-valid or meta-test.")
    if not (collection_dir / SPLITS_FILE).exists():
        return {"meta-train": [], "meta-valid": [], "meta-test": []}
    splits, problems = read_splits(collection_dir)
    if splits is None:
        raise DataProblemsError(f"Cannot update the splits of {collection_dir}", problems)
    return splits


def import_dataset(src: Path, collection_dir: Path, split: str | None = None,
                   name: str | None = None,
                   min_images_per_class: int = DEFAULT_MIN_IMAGES_PER_CLASS) -> Path:
    """Copy a Meta-Album dataset (zip, with or without a top-level folder, or folder) into a
    collection, and add it to `split` of `info/meta_splits.txt` when given.

    Args:
        src: the dataset zip or folder.
        collection_dir: the collection folder (created if missing).
        split: "meta-train", "meta-valid", "meta-test" or None (not listed in any split).
        name: folder name in the collection; default the dataset's folder (or zip) name.
        min_images_per_class: passed to the checker.
    Returns:
        The dataset folder inside the collection.
    Raises:
        DataProblemsError: the archive is unsafe or the dataset fails the checker; nothing has
            been written to the collection then.
        FileExistsError: a dataset of that name is already in the collection.
    """
    src, collection_dir = Path(src), Path(collection_dir)
    splits = _load_or_new_splits(collection_dir, split)
    collection_dir.mkdir(parents=True, exist_ok=True)
    staging = collection_dir / f".import-{uuid.uuid4().hex}"
    try:
        root, default_name = _stage_source(src, staging)
        dest = collection_dir / _check_name(name or default_name)
        if dest.exists():
            raise FileExistsError(f"{dest} already exists; pass another name (--name) or remove "
                                  "the existing dataset first.")
        problems = check_dataset(root, min_images_per_class)
        if problems:
            raise DataProblemsError(f"Refusing to import {src}", problems)
        if root == src:  # a folder: copy only once it passed the checker
            shutil.copytree(src, staging / "dataset")
            root = staging / "dataset"
        root.rename(dest)
    finally:
        remove_tree(staging)
    if split is not None and dest.name not in splits.get(split, []):
        splits.setdefault(split, []).append(dest.name)
    if split is not None or not (collection_dir / SPLITS_FILE).exists():
        write_splits(collection_dir, splits)
    return dest


def _check_name(name: str) -> str:
    if not name or name == "info" or name.startswith(".") or "/" in name or "\\" in name:
        raise ValueError(f"dataset name {name!r} cannot be a collection folder; expected a plain "
                         "folder name, not 'info', not hidden. Pass another name (--name).")
    return name


def _stage_source(src: Path, staging: Path) -> tuple[Path, str]:
    """Extract a zip into `staging` (a folder is left in place); return its root and name."""
    if src.is_dir():
        return src, src.name
    if not src.is_file():
        raise FileNotFoundError(f"{src} does not exist; pass a Meta-Album dataset zip or folder.")
    extract_zip_safely(src, staging / "extracted")
    root, problems = find_dataset_root(staging / "extracted")
    if root is None:
        raise DataProblemsError(f"Refusing to import {src}", problems)
    return root, (src.stem if root == staging / "extracted" else root.name)
