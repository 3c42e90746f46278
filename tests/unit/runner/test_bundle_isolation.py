"""The meta-test bundle the participant side reads holds no query labels, no dataset or class
names, and no query image of a run is ever a support image of that run."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.bundle import read_answers, read_meta_test
from submission_api.runner.prepare import prepare_run


def prepare(tmp_path, tiny_collection, arena_cache, name="cross-domain"):
    collection = load_collection(tiny_collection, arena_cache)
    params = ProtocolParams.from_dict({"name": name, "tasks_per_dataset": 4})
    prepare_run(collection, params, (1, 2), tmp_path / "bundle", tmp_path / "answers")
    return collection


def test_the_bundle_holds_only_the_contracted_files(tmp_path, tiny_collection, arena_cache):
    prepare(tmp_path, tiny_collection, arena_cache)

    meta_test = sorted(p.name for p in (tmp_path / "bundle" / "meta_test").iterdir())
    assert meta_test == ["query_images.u8", "support_images.u8", "support_labels.npy", "tasks.json"]
    tasks = json.loads((tmp_path / "bundle" / "meta_test" / "tasks.json").read_text())
    assert set(tasks[0]) == {
        "id",
        "n_ways",
        "n_shots",
        "n_support",
        "n_query",
        "support_offset",
        "query_offset",
    }
    assert not list((tmp_path / "bundle").rglob("query_labels*"))


def test_meta_test_datasets_are_not_in_the_meta_train_view(tmp_path, tiny_collection, arena_cache):
    collection = prepare(tmp_path, tiny_collection, arena_cache)

    view = sorted(p.name for p in (tmp_path / "bundle" / "meta_train").iterdir())
    assert view == sorted(collection.splits["meta-train"])
    assert not set(view) & set(collection.splits["meta-test"])


def test_no_query_image_of_a_run_is_ever_shown_as_support(tmp_path, tiny_collection, arena_cache):
    prepare(tmp_path, tiny_collection, arena_cache)
    bundle = read_meta_test(tmp_path / "bundle")

    def digests(images: np.ndarray) -> set[str]:
        return {hashlib.sha256(image.tobytes()).hexdigest() for image in images}

    support = digests(bundle.support_images)
    query = digests(bundle.query_images)
    assert support and query
    assert not support & query


def test_answers_match_the_bundle_task_by_task(tmp_path, tiny_collection, arena_cache):
    prepare(tmp_path, tiny_collection, arena_cache)
    bundle = read_meta_test(tmp_path / "bundle")
    answers, labels = read_answers(tmp_path / "answers")

    assert [t.id for t in bundle.tasks] == [a.id for a in answers]
    for task, answer in zip(bundle.tasks, answers, strict=True):
        window = labels[answer.query_offset : answer.query_offset + answer.n_query]
        assert task.n_query == answer.n_query == len(window)
        assert np.bincount(window, minlength=task.n_ways).min() > 0  # every way has queries
        _, support_labels = bundle.support(task)
        assert (
            np.bincount(support_labels, minlength=task.n_ways).tolist()
            == [task.n_shots] * task.n_ways
        )
