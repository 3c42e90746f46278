"""Reading the Meta-Album on-disk format: a dataset's `info.json` and `labels.csv`, and a
collection's `info/meta_splits.txt`.

Readers return what they could read together with every problem found, so that the checker can
report all of them and the compiler can refuse with the full list.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from submission_api.data.problems import Problem

INFO_FILE = "info.json"
LABELS_FILE = "labels.csv"
IMAGES_DIR = "images"
SPLITS_FILE = Path("info") / "meta_splits.txt"
ATTRIBUTES_COLUMN = "attributes"
"""Optional `labels.csv` column of `;`-separated per-image attributes (FewSTAB)."""
SPLIT_NAMES = ("meta-train", "meta-valid", "meta-test")
REQUIRED_SPLITS = ("meta-train", "meta-test")


@dataclass(frozen=True)
class DatasetTable:
    """The rows of a dataset's `labels.csv`, in file order, with the columns `info.json` names."""

    name: str
    root: Path
    files: tuple[str, ...]
    categories: tuple[str, ...]
    super_categories: tuple[str, ...] | None
    attributes: tuple[frozenset[str], ...] | None

    def image_path(self, i: int) -> Path:
        return self.root / IMAGES_DIR / self.files[i]


def parse_attributes(cell: str) -> frozenset[str]:
    """`"bg=red; border"` -> `{"bg=red", "border"}`; blanks are dropped."""
    return frozenset(a.strip() for a in cell.split(";") if a.strip())


def read_info(dataset_dir: Path) -> tuple[dict | None, list[Problem]]:
    """Read `info.json` and check that it names the image and category columns."""
    path = dataset_dir / INFO_FILE
    where = f"{dataset_dir.name}/{INFO_FILE}"
    if not path.is_file():
        return None, [Problem(where, "info.json is missing.",
                              "Add the info.json that ships with the Meta-Album dataset.")]
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [Problem(where, f"info.json is not valid JSON ({exc}).",
                              "Repair the file or restore it from the dataset download.")]
    if not isinstance(info, dict):
        return None, [Problem(where, f"expected a JSON object, got {type(info).__name__}.",
                              "Write info.json as an object with image/category column names.")]
    problems = [
        Problem(where, f"key {key!r} is missing or not a string (got {info.get(key)!r}).",
                f'Add "{key}": "<column of labels.csv>" to info.json.')
        for key in ("image_column_name", "category_column_name")
        if not isinstance(info.get(key), str) or not info.get(key)
    ]
    return (None if problems else info), problems


def super_category_column(info: dict) -> str | None:
    """The super-category column, or None when the dataset declares none."""
    column = info.get("super_category_column_name")
    if info.get("has_super_categories") is False or not isinstance(column, str) or not column:
        return None
    return column


def _check_file_name(name: str, where: str) -> list[Problem]:
    pure = PurePosixPath(name.replace("\\", "/"))
    if not name:
        return [Problem(where, "the image file name is empty.", "Fill in the file name.")]
    if pure.is_absolute() or ".." in pure.parts:
        return [Problem(where, f"file name {name!r} leaves the images/ folder.",
                        "Use a path relative to images/, without '..'.")]
    return []


def _read_rows(dataset_dir: Path) -> tuple[list[str], list[dict[str, str]], list[Problem]]:
    path = dataset_dir / LABELS_FILE
    where = f"{dataset_dir.name}/{LABELS_FILE}"
    if not path.is_file():
        return [], [], [Problem(where, "labels.csv is missing.",
                                "Add the labels.csv that ships with the Meta-Album dataset.")]
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = list(reader.fieldnames or [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return [], [], [Problem(where, f"labels.csv cannot be read ({exc}).",
                                "Save it as UTF-8 CSV with a header row.")]
    return header, rows, []


def read_dataset_table(dataset_dir: Path) -> tuple[DatasetTable | None, list[Problem]]:
    """Read a dataset's table; returns None (and the problems) when it is unusable."""
    dataset_dir = Path(dataset_dir)
    if not dataset_dir.is_dir():
        return None, [Problem(str(dataset_dir), "is not a folder.",
                              "Pass the folder that holds info.json, labels.csv and images/.")]
    info, problems = read_info(dataset_dir)
    header, rows, row_problems = _read_rows(dataset_dir)
    problems += row_problems
    if not (dataset_dir / IMAGES_DIR).is_dir():
        problems.append(Problem(f"{dataset_dir.name}/{IMAGES_DIR}",
                                "the images/ folder is missing.",
                                "Put the image files in an images/ folder beside labels.csv."))
    if info is None or row_problems:
        return None, problems
    columns = [info["image_column_name"], info["category_column_name"]]
    super_column = super_category_column(info)
    where = f"{dataset_dir.name}/{LABELS_FILE}"
    missing = [c for c in columns + [super_column] if c is not None and c not in header]
    for column in missing:
        problems.append(Problem(where, f"column {column!r} named in info.json is not in the "
                                f"header {header}.",
                                "Fix the column name in info.json or labels.csv."))
    if missing:
        return None, problems
    return _build_table(dataset_dir, info, header, rows, problems)


def _build_table(dataset_dir: Path, info: dict, header: list[str], rows: list[dict[str, str]],
                 problems: list[Problem]) -> tuple[DatasetTable | None, list[Problem]]:
    image_col, cat_col = info["image_column_name"], info["category_column_name"]
    super_col = super_category_column(info)
    files, cats, supers, attrs, seen = [], [], [], [], set()
    for line, row in enumerate(rows, start=2):
        where = f"{dataset_dir.name}/{LABELS_FILE} line {line}"
        name, cat = (row.get(image_col) or "").strip(), (row.get(cat_col) or "").strip()
        row_problems = _check_file_name(name, where)
        if not cat:
            row_problems.append(Problem(where, f"image {name!r} has an empty category.",
                                        "Give every row a category or remove the row."))
        if name in seen:
            row_problems.append(Problem(where, f"image {name!r} is listed twice.",
                                        "Keep one row per image file."))
        if super_col is not None and not (row.get(super_col) or "").strip():
            row_problems.append(Problem(where, f"image {name!r} has an empty super-category.",
                                        "Fill the super-category column for every row."))
        seen.add(name)
        problems += row_problems
        if row_problems:
            continue
        files.append(name)
        cats.append(cat)
        supers.append((row.get(super_col) or "").strip() if super_col else "")
        attrs.append(parse_attributes(row.get(ATTRIBUTES_COLUMN) or ""))
    if not files:
        problems.append(Problem(f"{dataset_dir.name}/{LABELS_FILE}", "no usable image rows.",
                                "List at least one image per class in labels.csv."))
        return None, problems
    table = DatasetTable(
        name=dataset_dir.name, root=dataset_dir, files=tuple(files), categories=tuple(cats),
        super_categories=tuple(supers) if super_col else None,
        attributes=tuple(attrs) if ATTRIBUTES_COLUMN in header else None,
    )
    return table, problems


def read_splits(collection_dir: Path) -> tuple[dict[str, list[str]] | None, list[Problem]]:
    """Read `info/meta_splits.txt`: `{"meta-train": [...], "meta-test": [...]}` (+ meta-valid)."""
    path = Path(collection_dir) / SPLITS_FILE
    where = f"{Path(collection_dir).name}/{SPLITS_FILE.as_posix()}"
    fix = 'Write JSON like {"meta-train": ["a", "b"], "meta-test": ["c"]}.'
    if not path.is_file():
        return None, [Problem(where, "meta_splits.txt is missing.", fix)]
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [Problem(where, f"not valid JSON ({exc}).", fix)]
    if not isinstance(raw, dict):
        return None, [Problem(where, f"expected a JSON object, got {type(raw).__name__}.", fix)]
    problems = [Problem(where, f"unknown split {key!r}; expected one of {list(SPLIT_NAMES)}.",
                        "Rename or remove that key.") for key in raw if key not in SPLIT_NAMES]
    problems += [Problem(where, f"split {key!r} is missing.", fix)
                 for key in REQUIRED_SPLITS if key not in raw]
    splits: dict[str, list[str]] = {}
    for key in SPLIT_NAMES:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problems.append(Problem(where, f"split {key!r} must be a list of dataset names, got "
                                    f"{value!r}.", fix))
            continue
        splits[key] = list(value)
    return (None if problems else splits), problems


def write_splits(collection_dir: Path, splits: dict[str, list[str]]) -> None:
    """Write `info/meta_splits.txt` (replacing it atomically)."""
    path = Path(collection_dir) / SPLITS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(splits, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def list_dataset_dirs(collection_dir: Path) -> list[Path]:
    """Dataset folders of a collection: every visible sub-folder except `info/`, sorted."""
    return sorted(p for p in Path(collection_dir).iterdir()
                  if p.is_dir() and p.name != "info" and not p.name.startswith("."))
