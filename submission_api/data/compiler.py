"""Compiling a Meta-Album dataset folder into the content-addressed cache `<cache>/<hash>/`.

Each image is decoded once. A source fingerprint (the folder's path, and the relative path,
size and mtime_ns of every file in it) maps the folder to its entry, so an unchanged dataset is
never recompiled and a changed one always is; entries themselves are named by the hash of their
content, so two equal datasets share one entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
from PIL import Image

from submission_api.data.archive import remove_tree
from submission_api.data.compiled import (
    FORMAT_VERSION,
    IMAGE_SHAPE,
    MANIFEST,
    CompiledDataError,
    CompiledDataset,
    EntryMeta,
    create_image_file,
    finalize_entry,
    new_staging_dir,
    open_compiled,
    publish_entry,
)
from submission_api.data.metaalbum import DatasetTable, read_dataset_table
from submission_api.data.problems import DataProblemsError, Problem

SOURCES_DIR = "sources"
"""`<cache>/sources/<fingerprint>.json` -> {"content_hash": ...}."""


def compute_source_fingerprint(dataset_dir: Path) -> str:
    """sha256 over the folder's absolute path and (relative path, size, mtime_ns) of its files."""
    root = Path(dataset_dir).resolve()
    lines = [f"format={FORMAT_VERSION}", str(root)]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fname in sorted(filenames):
            st = os.stat(os.path.join(dirpath, fname))
            rel = os.path.relpath(os.path.join(dirpath, fname), root)
            lines.append(f"{rel}\t{st.st_size}\t{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def compile_dataset(dataset_dir: Path, cache_dir: Path) -> CompiledDataset:
    """Compile `dataset_dir` into `cache_dir` (or reuse its entry) and open it.

    Images are stored sorted by (class name, file name), so the entry and its hash do not depend
    on the row order of labels.csv.

    Raises:
        DataProblemsError: the dataset is unusable (run `arena data check` for the full report).
    """
    dataset_dir, cache_dir = Path(dataset_dir), Path(cache_dir)
    fingerprint = compute_source_fingerprint(dataset_dir)
    cached = _lookup(cache_dir, fingerprint, dataset_dir.name)
    if cached is not None:
        return cached
    table, problems = read_dataset_table(dataset_dir)
    if table is None or problems:
        raise DataProblemsError(f"Cannot compile {dataset_dir}", problems)
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = new_staging_dir(cache_dir)
    try:
        order = sorted(range(len(table.files)),
                       key=lambda i: (table.categories[i], table.files[i]))
        _decode_into(staging, table, order)
        content_hash = finalize_entry(staging, _table_meta(table, order))
        publish_entry(staging, cache_dir / content_hash)
    finally:
        if staging.exists():
            remove_tree(staging)
    _record(cache_dir, fingerprint, content_hash, dataset_dir)
    return open_compiled(cache_dir / content_hash, name=dataset_dir.name)


def _lookup(cache_dir: Path, fingerprint: str, name: str) -> CompiledDataset | None:
    try:
        record = json.loads((cache_dir / SOURCES_DIR / f"{fingerprint}.json").read_text())
        entry = cache_dir / record["content_hash"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (entry / MANIFEST).is_file():
        return None
    try:
        return open_compiled(entry, name=name)
    except CompiledDataError:
        return None


def _record(cache_dir: Path, fingerprint: str, content_hash: str, source: Path) -> None:
    folder = cache_dir / SOURCES_DIR
    folder.mkdir(exist_ok=True)
    tmp = folder / f".{fingerprint}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"content_hash": content_hash, "source": str(source.resolve())}))
    os.replace(tmp, folder / f"{fingerprint}.json")


def _decode_into(staging: Path, table: DatasetTable, order: list[int]) -> None:
    """Decode every image of `table` (in `order`) into `staging/images.u8`."""
    images = create_image_file(staging, len(order))
    problems = []
    for row, i in enumerate(order):
        try:
            with Image.open(table.image_path(i)) as img:
                pixels = np.asarray(img.convert("RGB"))
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            problems.append(Problem(f"{table.name}/images/{table.files[i]}",
                                    f"cannot be decoded ({exc}).",
                                    "Replace the file or remove its row from labels.csv."))
            continue
        if pixels.shape != IMAGE_SHAPE:
            problems.append(Problem(f"{table.name}/images/{table.files[i]}",
                                    f"is {pixels.shape[1]}x{pixels.shape[0]}, expected 128x128.",
                                    "Resize it to 128x128 (Meta-Album format)."))
            continue
        images[row] = pixels
    images.flush()
    del images
    if problems:
        raise DataProblemsError(f"Cannot compile {table.root}", problems)


def _table_meta(table: DatasetTable, order: list[int]) -> EntryMeta:
    class_names = tuple(sorted(set(table.categories)))
    class_index = {c: k for k, c in enumerate(class_names)}
    labels = np.array([class_index[table.categories[i]] for i in order], dtype=np.int64)
    supers, super_names = None, None
    if table.super_categories is not None:
        parent = dict(zip(table.categories, table.super_categories, strict=True))
        super_names = tuple(sorted(set(table.super_categories)))
        super_index = {s: k for k, s in enumerate(super_names)}
        supers = np.array([super_index[parent[c]] for c in class_names], dtype=np.int64)
    attributes = None
    if table.attributes is not None:
        attributes = tuple(table.attributes[i] for i in order)
    return EntryMeta(table.name, labels, class_names, supers, super_names, attributes)
