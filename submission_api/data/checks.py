"""The data checker: every problem of a dataset or collection, each with where, what and a fix.

Used by `arena data check`, by `import_dataset` before anything is copied, and by organizers
before a phase opens. It decodes every image once, so it is as slow as a compile.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from PIL import Image

from submission_api.data.metaalbum import (
    INFO_FILE,
    SPLITS_FILE,
    DatasetTable,
    list_dataset_dirs,
    read_dataset_table,
    read_splits,
)
from submission_api.data.problems import Problem

IMAGE_SIZE = 128
"""Meta-Album images are 128x128 pixels."""
DEFAULT_MIN_IMAGES_PER_CLASS = 21
"""Cross-domain protocol: 1 support shot + 20 query images per class."""
MIN_CLASSES = 2
"""A task has at least 2 ways."""


def check_image(path: Path, where: str) -> list[Problem]:
    """Decode one image; report it missing, unreadable or not 128x128."""
    if not path.is_file():
        return [Problem(where, f"image file {path.name!r} listed in labels.csv does not exist.",
                        "Add the file to images/ or remove its row from labels.csv.")]
    try:
        with Image.open(path) as img:
            img.load()
            size = img.size
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        return [Problem(where, f"image {path.name!r} cannot be decoded ({exc}).",
                        "Replace it with a valid JPEG/PNG or remove its row.")]
    if size != (IMAGE_SIZE, IMAGE_SIZE):
        return [Problem(where, f"image {path.name!r} is {size[0]}x{size[1]}, expected "
                        f"{IMAGE_SIZE}x{IMAGE_SIZE}.", "Resize it to 128x128 (Meta-Album format).")]
    return []


def _check_classes(table: DatasetTable, min_images_per_class: int) -> list[Problem]:
    where = f"{table.name}/labels.csv"
    counts = Counter(table.categories)
    problems = [
        Problem(where, f"class {name!r} has {n} images, fewer than the {min_images_per_class} "
                "the protocol needs.", "Add images, drop the class, or lower "
                "--min-images-per-class to what your protocol needs (shots + queries).")
        for name, n in sorted(counts.items()) if n < min_images_per_class
    ]
    if len(counts) < MIN_CLASSES:
        problems.append(Problem(where, f"{len(counts)} class(es) found, a task needs at least "
                                f"{MIN_CLASSES}.", "Label the images with at least 2 classes."))
    if table.super_categories is not None:
        parents = defaultdict(set)
        for cat, sup in zip(table.categories, table.super_categories, strict=True):
            parents[cat].add(sup)
        problems += [Problem(where, f"class {cat!r} belongs to several super-categories "
                             f"{sorted(sups)}.", "Give each class exactly one super-category.")
                     for cat, sups in sorted(parents.items()) if len(sups) > 1]
    return problems


def check_dataset(dataset_dir: Path,
                  min_images_per_class: int = DEFAULT_MIN_IMAGES_PER_CLASS) -> list[Problem]:
    """Every problem of one Meta-Album dataset folder (empty list: it is usable).

    Args:
        dataset_dir: folder with `info.json`, `labels.csv`, `images/`.
        min_images_per_class: smallest class the protocol can use (shots + queries).
    """
    table, problems = read_dataset_table(Path(dataset_dir))
    if table is None:
        return problems
    problems += _check_classes(table, min_images_per_class)
    for i, name in enumerate(table.files):
        problems += check_image(table.image_path(i), f"{table.name}/images/{name}")
    return problems


def check_collection(collection_dir: Path,
                     min_images_per_class: int = DEFAULT_MIN_IMAGES_PER_CLASS) -> list[Problem]:
    """Every problem of a collection: its `meta_splits.txt` and each of its datasets."""
    collection_dir = Path(collection_dir)
    if not collection_dir.is_dir():
        return [Problem(str(collection_dir), "is not a folder.",
                        "Pass the collection folder (datasets + info/meta_splits.txt).")]
    dataset_dirs = list_dataset_dirs(collection_dir)
    splits, problems = read_splits(collection_dir)
    if splits is not None:
        problems += _check_split_names(collection_dir, splits, {d.name for d in dataset_dirs})
    for d in dataset_dirs:
        problems += check_dataset(d, min_images_per_class)
    return problems


def _check_split_names(collection_dir: Path, splits: dict[str, list[str]],
                       present: set[str]) -> list[Problem]:
    where = f"{collection_dir.name}/{SPLITS_FILE.as_posix()}"
    problems = []
    owner: dict[str, str] = {}
    for split, names in splits.items():
        for name in names:
            if name not in present:
                problems.append(Problem(where, f"{split!r} lists dataset {name!r}, which is not a "
                                        f"folder of the collection (found {sorted(present)}).",
                                        "Import the dataset or remove the name from the split."))
            if name in owner:
                problems.append(Problem(where, f"dataset {name!r} is in both {owner[name]!r} and "
                                        f"{split!r}.", "List each dataset in one split only."))
            owner.setdefault(name, split)
    return problems


def check_path(path: Path,
               min_images_per_class: int = DEFAULT_MIN_IMAGES_PER_CLASS) -> list[Problem]:
    """Check a dataset folder, a collection folder or a dataset zip, whichever `path` is."""
    from submission_api.data.importing import check_archive

    path = Path(path)
    if path.is_file():
        return check_archive(path, min_images_per_class)
    if (path / INFO_FILE).exists():
        return check_dataset(path, min_images_per_class)
    if (path / SPLITS_FILE).parent.is_dir():
        return check_collection(path, min_images_per_class)
    return [Problem(str(path), "is neither a dataset (no info.json), a collection (no info/ "
                    "folder) nor a zip file.", "Pass a Meta-Album dataset, zip or collection.")]
