"""The views as written to disk by `runner.prepare.prepare_run`: what the participant side can
open holds none of the pixels a protocol keeps back (id-ood's held-out images, within-domain's
valid and test classes). Compares pixels, not indices, so a wrong subset write would show."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from starting_kit.sample_data import generate_collection
from submission_api.data import load_collection, open_compiled
from submission_api.data.collection import Collection
from submission_api.protocols import ProtocolParams
from submission_api.protocols.splits import compute_held_out_images
from submission_api.protocols.within_domain import compute_within_domain_splits
from submission_api.runner.prepare import prepare_run


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    root = generate_collection(tmp_path_factory.mktemp("views") / "col", n_classes=10,
                               n_images=12, image_format="png",
                               domains=("stripes", "glyphs", "spectra"))
    splits = {"meta-train": ["stripes"], "meta-valid": ["glyphs"], "meta-test": ["spectra"]}
    (root / "info" / "meta_splits.txt").write_text(json.dumps(splits))
    return load_collection(root, tmp_path_factory.mktemp("cache"))


def _digests(images: np.ndarray) -> set[str]:
    return {hashlib.sha256(np.ascontiguousarray(img).tobytes()).hexdigest() for img in images}


def _view_digests(folder: Path) -> dict[str, set[str]]:
    if not folder.is_dir():
        return {}
    return {p.name: _digests(open_compiled(p).images) for p in folder.iterdir() if p.is_dir()}


def test_id_ood_held_out_pixels_are_absent_from_the_written_meta_train_view(collection, tmp_path):
    params = ProtocolParams(name="id-ood", n_ways=2, n_shots=1, n_queries=1,
                            tasks_per_dataset=2, split_seed=3)
    prepare_run(collection, params, (3, 1), tmp_path / "bundle", tmp_path / "answers")
    train = _view_digests(tmp_path / "bundle" / "meta_train")
    assert sorted(train) == ["stripes"]
    ds = collection.datasets["stripes"]
    held = compute_held_out_images(ds.labels, len(ds.class_names), 0.2, 3, "stripes")
    held_pixels = _digests(ds.images[held])
    assert len(held_pixels) == len(held) > 0  # generated images are all distinct
    assert not held_pixels & train["stripes"]
    assert train["stripes"] | held_pixels == _digests(ds.images)
    assert all(not held_pixels & pixels
               for pixels in _view_digests(tmp_path / "bundle" / "meta_valid").values())


def test_within_domain_valid_and_test_pixels_stay_out_of_the_meta_train_view(collection,
                                                                             tmp_path):
    params = ProtocolParams(name="within-domain", n_ways=2, n_shots=1, n_queries=2,
                            tasks_per_dataset=2, split_seed=5)
    prepare_run(collection, params, (5, 0), tmp_path / "bundle", tmp_path / "answers")
    train = _view_digests(tmp_path / "bundle" / "meta_train")
    valid = _view_digests(tmp_path / "bundle" / "meta_valid")
    splits = compute_within_domain_splits(params, collection)
    assert sorted(train) == sorted(valid) == sorted(splits)
    for name, (train_c, valid_c, test_c) in splits.items():
        ds = collection.datasets[name]
        pixels = [_digests(ds.images[np.isin(ds.labels, part)])
                  for part in (train_c, valid_c, test_c)]
        assert train[name] == pixels[0]
        assert valid[name] == pixels[1]
        assert not pixels[2] & (train[name] | valid[name])


@pytest.mark.parametrize("run_test_tasks, differ", [("shared", False), ("fresh", True)])
def test_a_runs_prepared_test_tasks_follow_the_phases_run_test_tasks(collection, tmp_path,
                                                                    run_test_tasks, differ):
    """Issue 36.4: the NeurIPS'22 kit draws new test tasks per run seed, MetaDL keeps them;
    the phase chooses, and prepare_run (platform and `arena run` alike) follows it."""
    params = ProtocolParams(name="fixed", n_ways=3, n_shots=1, n_queries=2, tasks_per_dataset=4,
                            run_test_tasks=run_test_tasks)
    for run in (0, 1):
        prepare_run(collection, params, (3, run), tmp_path / f"b{run}", tmp_path / f"a{run}")
    answers = [{p.relative_to(tmp_path / f"a{run}"): p.read_bytes()
                for p in sorted((tmp_path / f"a{run}").rglob("*")) if p.is_file()}
               for run in (0, 1)]
    assert answers[0] and (answers[0] != answers[1]) is differ
