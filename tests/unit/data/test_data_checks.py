"""The checker reports every problem of a dataset or collection, each with where, what and fix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from data_fakes import write_collection, write_dataset
from PIL import Image

from submission_api.data import check_collection, check_dataset, check_path


def _messages(problems) -> str:
    return "\n".join(str(p) for p in problems)


def test_a_clean_dataset_has_no_problems(dataset: Path) -> None:
    assert check_dataset(dataset, min_images_per_class=4) == []


def _drop_info(d: Path) -> None:
    (d / "info.json").unlink()


def _bad_column(d: Path) -> None:
    info = json.loads((d / "info.json").read_text())
    info["category_column_name"] = "LABEL"
    (d / "info.json").write_text(json.dumps(info))


def _missing_image(d: Path) -> None:
    (d / "images" / "img_1_2.png").unlink()


def _unreadable_image(d: Path) -> None:
    (d / "images" / "img_0_0.png").write_bytes(b"not a png")


def _wrong_size(d: Path) -> None:
    Image.new("RGB", (64, 100)).save(d / "images" / "img_2_3.png")


def _duplicate_row(d: Path) -> None:
    with (d / "labels.csv").open("a") as f:
        f.write("img_0_1.png,class_0\n")


def _escaping_name(d: Path) -> None:
    with (d / "labels.csv").open("a") as f:
        f.write("../secret.png,class_0\n")


def _no_labels(d: Path) -> None:
    (d / "labels.csv").unlink()


@pytest.mark.parametrize(("damage", "expected"), [
    (_drop_info, "info.json is missing"),
    (_bad_column, "column 'LABEL'"),
    (_missing_image, "'img_1_2.png' listed in labels.csv does not exist"),
    (_unreadable_image, "'img_0_0.png' cannot be decoded"),
    (_wrong_size, "is 64x100, expected 128x128"),
    (_duplicate_row, "listed twice"),
    (_escaping_name, "leaves the images/ folder"),
    (_no_labels, "labels.csv is missing"),
])
def test_each_damage_is_reported_with_a_fix(dataset: Path, damage, expected: str) -> None:
    damage(dataset)
    problems = check_dataset(dataset, min_images_per_class=4)
    assert expected in _messages(problems)
    assert all(p.where and p.fix for p in problems)


def test_every_problem_is_reported_not_just_the_first(dataset: Path) -> None:
    _missing_image(dataset)
    _unreadable_image(dataset)
    _wrong_size(dataset)
    assert len(check_dataset(dataset, min_images_per_class=4)) == 3


def test_small_classes_are_reported_against_the_protocol_minimum(dataset: Path) -> None:
    problems = check_dataset(dataset)  # default 21 = 1 shot + 20 queries
    assert len(problems) == 3
    assert "class 'class_0' has 4 images, fewer than the 21" in _messages(problems)


def test_a_single_class_cannot_make_a_task(tmp_path: Path) -> None:
    d = write_dataset(tmp_path / "one", n_classes=1)
    assert "at least 2" in _messages(check_dataset(d, min_images_per_class=1))


def test_a_class_in_two_super_categories_is_reported(tmp_path: Path) -> None:
    d = write_dataset(tmp_path / "s", super_categories=True)
    text = (d / "labels.csv").read_text().replace("img_0_0.png,class_0,super_0",
                                                  "img_0_0.png,class_0,super_1")
    (d / "labels.csv").write_text(text)
    assert "several super-categories" in _messages(check_dataset(d, min_images_per_class=1))


def test_collection_reports_unknown_and_doubly_listed_datasets(tmp_path: Path) -> None:
    c = write_collection(tmp_path / "col", ["a"], ["b"])
    (c / "info" / "meta_splits.txt").write_text(
        json.dumps({"meta-train": ["a", "ghost"], "meta-test": ["b", "a"]}))
    text = _messages(check_collection(c, min_images_per_class=4))
    assert "'ghost', which is not a folder" in text
    assert "'a' is in both" in text


@pytest.mark.parametrize(("content", "expected"), [
    ("{not json", "not valid JSON"),
    ('{"meta-train": []}', "'meta-test' is missing"),
    ('{"meta-train": [], "meta-test": [], "train": []}', "unknown split 'train'"),
    ('{"meta-train": "a", "meta-test": []}', "must be a list"),
])
def test_bad_splits_files_are_reported(tmp_path: Path, content: str, expected: str) -> None:
    c = write_collection(tmp_path / "col", ["a"], [])
    (c / "info" / "meta_splits.txt").write_text(content)
    assert expected in _messages(check_collection(c, min_images_per_class=4))


def test_check_path_dispatches_on_what_it_is_given(tmp_path: Path, dataset: Path) -> None:
    _missing_image(dataset)
    assert len(check_path(dataset, 4)) == 1
    c = write_collection(tmp_path / "col", ["a"], ["b"])
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(c / "b" / "images" / "img_0_0.png")
    assert "expected 128x128" in _messages(check_path(c, 4))
    assert "neither a dataset" in _messages(check_path(tmp_path / "src", 4))
