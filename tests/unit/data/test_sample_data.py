"""The sample-data generator and the digits converter write data that passes the checker."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from starting_kit.commands.data import app
from starting_kit.digits import convert_digits
from starting_kit.sample_data import ALL_DOMAINS, generate_collection
from submission_api.data import check_collection, check_dataset, compile_dataset


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_collection(tmp_path_factory.mktemp("gen") / "col", seed=3, n_classes=5,
                               n_images=21)


def test_generated_collection_passes_the_checker(collection: Path) -> None:
    assert check_collection(collection) == []
    splits = json.loads((collection / "info" / "meta_splits.txt").read_text())
    assert splits == {"meta-train": ["stripes", "blobs", "glyphs"],
                      "meta-test": ["spectra", "mosaic"]}
    assert sorted(p.name for p in collection.iterdir()) == sorted([*ALL_DOMAINS, "info"])


def test_spurious_images_carry_attributes_correlated_with_class(collection: Path,
                                                                tmp_path: Path) -> None:
    compiled = compile_dataset(collection / "spurious", tmp_path)
    assert compiled.attributes is not None
    assert all({a.split("=")[0] for a in attrs} == {"background", "border", "mark"}
               for attrs in compiled.attributes)
    backgrounds = [next(a for a in attrs if a.startswith("background"))
                   for attrs in compiled.attributes]
    for members in compiled.class_members():
        values = [backgrounds[i] for i in members]
        top = max(set(values), key=values.count)
        assert values.count(top) > len(values) / 2  # correlated with the class...
    assert len(set(backgrounds)) > 1  # ...but not a single value


def test_some_domains_have_super_categories(collection: Path, tmp_path: Path) -> None:
    blobs = compile_dataset(collection / "blobs", tmp_path)
    assert blobs.super_categories is not None and len(set(blobs.super_categories)) == 5
    assert compile_dataset(collection / "stripes", tmp_path).super_categories is None


def test_same_seed_same_images_other_seed_other_images(collection: Path,
                                                       tmp_path: Path) -> None:
    again = generate_collection(tmp_path / "a", seed=3, n_classes=5, n_images=21,
                                domains=["glyphs"])
    other = generate_collection(tmp_path / "b", seed=4, n_classes=5, n_images=21,
                                domains=["glyphs"])
    h = {name: compile_dataset(root / "glyphs", tmp_path / "cache").content_hash
         for name, root in [("orig", collection), ("again", again), ("other", other)]}
    assert h["orig"] == h["again"] != h["other"]


def test_classes_are_learnable_but_not_trivial(collection: Path, tmp_path: Path) -> None:
    """Nearest class mean on raw pixels: well above chance (1/5), below perfect."""
    rng = np.random.default_rng(0)
    ds = compile_dataset(collection / "stripes", tmp_path)
    x = ds.images[:, ::4, ::4].reshape(len(ds.labels), -1).astype(np.float32)
    members = ds.class_members()
    correct = total = 0
    for _ in range(20):
        perm = [rng.permutation(m) for m in members]
        protos = np.stack([x[p[:5]].mean(0) for p in perm])
        for c, p in enumerate(perm):
            pred = ((x[p[5:], None] - protos[None]) ** 2).sum(-1).argmin(1)
            correct, total = correct + (pred == c).sum(), total + len(pred)
    assert 0.35 < correct / total < 0.98


def test_digits_convert_to_a_valid_dataset(tmp_path: Path) -> None:
    root = convert_digits(tmp_path, max_per_class=21)
    assert check_dataset(root) == []
    assert len(list((root / "images").iterdir())) == 210


def test_cli_check_exits_1_and_lists_problems(collection: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["check", str(collection / "blobs")]).exit_code == 0
    result = runner.invoke(app, ["check", str(collection / "blobs"),
                                 "--min-images-per-class", "30"])
    assert result.exit_code == 1 and "5 problem(s)" in result.output  # one per class
    result = runner.invoke(app, ["import", str(collection / "glyphs"), "--collection",
                                 str(tmp_path / "c"), "--split", "meta-test"])
    assert result.exit_code == 0 and (tmp_path / "c" / "glyphs" / "labels.csv").is_file()
