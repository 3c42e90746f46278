"""Compiled dataset entries: the decoded pixels of a dataset as one uint8 memory map, plus labels
and a manifest whose content hash names the entry.

Tasks are cut from these entries, never by decoding image files per task. An entry is written
to a temporary sibling folder and renamed into place, so a reader (or a concurrent writer) never
sees half of one. Entry layout (docs/internals.md): `manifest.json`, `images.u8` (raw uint8
`[n, 128, 128, 3]`), `labels.npy` (int64 class index), optional `attributes.json`.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from submission_api.data.archive import remove_tree

IMAGE_SHAPE = (128, 128, 3)
FORMAT_VERSION = 1
MANIFEST, IMAGES, LABELS, ATTRIBUTES = "manifest.json", "images.u8", "labels.npy", "attributes.json"
_HASH_CHUNK = 256
"""Images hashed per read: 12 MiB, small enough to stay in cache-friendly memory."""


class CompiledDataError(ValueError):
    """A compiled entry is missing, incomplete or inconsistent."""


@dataclass(frozen=True, eq=False)
class CompiledDataset:
    """A compiled dataset. Image `i` has class `labels[i]`, named `class_names[labels[i]]`;
    classes are indexed in sorted order of their names."""

    name: str
    root: Path
    content_hash: str
    images: np.ndarray  # uint8 [n, 128, 128, 3], read-only memmap
    labels: np.ndarray  # int64 [n], 0..C-1
    class_names: tuple[str, ...]  # C
    super_categories: np.ndarray | None  # int64 [C] or None
    attributes: tuple[frozenset[str], ...] | None  # per image, or None
    _members: list[np.ndarray] | None = field(default=None, init=False, repr=False)

    def class_members(self) -> list[np.ndarray]:
        """Sorted image indices of each class (int64), computed once."""
        members = self._members
        if members is None:
            order = np.argsort(self.labels, kind="stable")
            counts = np.bincount(self.labels, minlength=len(self.class_names))
            members = np.split(order.astype(np.int64), np.cumsum(counts)[:-1])
            object.__setattr__(self, "_members", members)
        return members


@dataclass(frozen=True)
class EntryMeta:
    """Everything of an entry but its pixels; what `finalize_entry` writes beside `images.u8`."""

    name: str
    labels: np.ndarray
    class_names: tuple[str, ...]
    super_categories: np.ndarray | None = None
    super_category_names: tuple[str, ...] | None = None
    attributes: tuple[frozenset[str], ...] | None = None
    extra: dict = field(default_factory=dict)


def compute_content_hash(images: np.ndarray, meta: EntryMeta) -> str:
    """sha256 of the compiled bytes and class names (the dataset name is not part of it)."""
    h = hashlib.sha256(b"metadl-arena-compiled-v1\0")
    h.update(json.dumps(list(images.shape)).encode())
    for start in range(0, len(images), _HASH_CHUNK):
        h.update(np.ascontiguousarray(images[start:start + _HASH_CHUNK]).tobytes())
    h.update(np.ascontiguousarray(meta.labels, dtype="<i8").tobytes())
    h.update(json.dumps(_describe(meta), sort_keys=True).encode())
    return h.hexdigest()


def _describe(meta: EntryMeta) -> dict:
    supers = meta.super_categories
    return {
        "class_names": list(meta.class_names),
        "super_categories": None if supers is None else [int(s) for s in supers],
        "super_category_names": None if meta.super_category_names is None
        else list(meta.super_category_names),
        "attributes": None if meta.attributes is None else [sorted(a) for a in meta.attributes],
    }


def new_staging_dir(parent: Path) -> Path:
    """A fresh hidden folder under `parent`, on the same file system as the final entry."""
    path = Path(parent) / f".tmp-{uuid.uuid4().hex}"
    path.mkdir(parents=True)
    return path


def create_image_file(entry_dir: Path, n_images: int) -> np.memmap:
    """The writable `images.u8` memmap of an entry being built."""
    if n_images < 1:
        raise CompiledDataError(f"an entry needs at least one image, got {n_images}; "
                                "check that labels.csv lists images.")
    return np.memmap(entry_dir / IMAGES, dtype=np.uint8, mode="w+", shape=(n_images, *IMAGE_SHAPE))


def finalize_entry(staging: Path, meta: EntryMeta) -> str:
    """Write labels, attributes and manifest beside `staging/images.u8`; return the hash."""
    images = np.memmap(staging / IMAGES, dtype=np.uint8, mode="r").reshape(-1, *IMAGE_SHAPE)
    content_hash = compute_content_hash(images, meta)
    np.save(staging / LABELS, np.asarray(meta.labels, dtype=np.int64), allow_pickle=False)
    if meta.attributes is not None:
        (staging / ATTRIBUTES).write_text(json.dumps([sorted(a) for a in meta.attributes]))
    manifest = {"format": FORMAT_VERSION, "name": meta.name, "content_hash": content_hash,
                "n_images": len(images), "image_shape": list(IMAGE_SHAPE), **_describe(meta),
                **meta.extra}
    manifest["has_attributes"] = manifest.pop("attributes") is not None
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return content_hash


def publish_entry(staging: Path, final: Path) -> None:
    """Rename a finished entry into place; if an equal entry won the race, drop ours."""
    try:
        os.rename(staging, final)
    except OSError:
        if not (final / MANIFEST).is_file():
            remove_tree(staging)
            raise
        remove_tree(staging)


def open_compiled(root: Path, name: str | None = None) -> CompiledDataset:
    """Open a compiled entry, without its source (inside the sandbox, in the worker).

    Args:
        root: the entry folder (holding `manifest.json`).
        name: the dataset name to report; default the one recorded in the manifest.
    Raises:
        CompiledDataError: the entry is missing, incomplete or inconsistent.
    """
    root = Path(root)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        labels = np.load(root / LABELS, allow_pickle=False)
        n = int(manifest["n_images"])
        size = (root / IMAGES).stat().st_size
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CompiledDataError(f"{root} is not a complete compiled entry ({exc!r}); expected "
                                f"{MANIFEST}, {IMAGES} and {LABELS}. Recompile the dataset "
                                "(`arena data compile`).") from exc
    class_names = tuple(manifest["class_names"])
    expected = n * int(np.prod(IMAGE_SHAPE))
    if manifest.get("format") != FORMAT_VERSION or size != expected or labels.shape != (n,) \
            or labels.dtype != np.int64 or (n and not 0 <= labels.min() <= labels.max()
                                            < len(class_names)):
        raise CompiledDataError(
            f"{root}: inconsistent entry (format {manifest.get('format')}, {size} image bytes, "
            f"labels {labels.shape} {labels.dtype}); expected format {FORMAT_VERSION}, {expected} "
            f"bytes, int64 labels [{n}] in 0..{len(class_names) - 1}. Recompile the dataset.")
    images = np.memmap(root / IMAGES, dtype=np.uint8, mode="r", shape=(n, *IMAGE_SHAPE))
    supers = manifest.get("super_categories")
    return CompiledDataset(
        name=name or manifest["name"], root=root, content_hash=manifest["content_hash"],
        images=images, labels=labels, class_names=class_names,
        super_categories=None if supers is None else np.asarray(supers, dtype=np.int64),
        attributes=_read_attributes(root) if manifest.get("has_attributes") else None,
    )


def _read_attributes(root: Path) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(a) for a in json.loads((root / ATTRIBUTES).read_text()))


def read_manifest(root: Path) -> dict:
    """The manifest of an entry (e.g. to show its super-category names)."""
    return json.loads((Path(root) / MANIFEST).read_text())


def verify_compiled(dataset: CompiledDataset) -> bool:
    """Recompute the content hash of an opened entry (e.g. after a download) and compare."""
    manifest = read_manifest(dataset.root)
    names = manifest.get("super_category_names")
    meta = EntryMeta(dataset.name, dataset.labels, dataset.class_names, dataset.super_categories,
                     None if names is None else tuple(names), dataset.attributes)
    return compute_content_hash(dataset.images, meta) == dataset.content_hash
