"""What preparation leaves where: the bundle the meta-train side reads holds no test task at all
(no pixels, labels, indices, dataset or class names of meta-test); the task plan the trusted side
keeps is index lists, not pixels; and, with `test_pools: per_run`, no query image of a run is
ever a support image of it."""

from __future__ import annotations

import json

import numpy as np

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.bundle import TaskImages, read_answers, read_task_plan
from submission_api.runner.prepare import prepare_run


def prepare(tmp_path, tiny_collection, arena_cache, name="cross-domain", tasks=4, **extra):
    collection = load_collection(tiny_collection, arena_cache)
    params = ProtocolParams.from_dict({"name": name, "tasks_per_dataset": tasks, **extra})
    prepare_run(collection, params, (1, 2), tmp_path / "bundle", tmp_path / "answers")
    return collection


def test_the_bundle_holds_no_test_task(tmp_path, tiny_collection, arena_cache):
    collection = prepare(tmp_path, tiny_collection, arena_cache)

    bundle = tmp_path / "bundle"
    assert sorted(p.name for p in bundle.iterdir()) == ["meta_train", "meta_valid", "run.json"]
    names = {p.name for p in bundle.rglob("*")}
    assert not names & set(collection.splits["meta-test"])
    info = json.loads((bundle / "run.json").read_text())
    assert set(info) == {"participant_seed", "protocol", "threads", "n_tasks"}
    assert info["participant_seed"] == 2  # the test seed (1) is never written for the sandbox


def test_the_task_plan_is_index_lists_not_pixels(tmp_path, tiny_collection, arena_cache):
    prepare(tmp_path, tiny_collection, arena_cache, tasks=50)

    answers = tmp_path / "answers"
    sizes = sum(p.stat().st_size for p in answers.rglob("*") if p.is_file())
    plan = read_task_plan(answers)
    n_images = sum(t.n_support + t.n_query for t in plan.tasks)
    assert sizes < n_images * 64  # a few int64 per image, nowhere near 49,152 bytes of pixels
    assert not list(answers.rglob("*.u8"))


def test_no_query_image_of_a_run_is_ever_shown_as_support(tmp_path, tiny_collection, arena_cache):
    prepare(tmp_path, tiny_collection, arena_cache, test_pools="per_run")
    plan = read_task_plan(tmp_path / "answers")

    support, query = set(), set()
    for task in plan.tasks:
        support |= {(task.dataset, int(i)) for i in plan.window("support_index", task)}
        query |= {(task.dataset, int(i)) for i in plan.window("query_index", task)}
    assert support and query
    assert not support & query


def test_cut_images_are_the_compiled_rows_of_each_task(tmp_path, tiny_collection, arena_cache):
    collection = prepare(tmp_path, tiny_collection, arena_cache)
    plan = read_task_plan(tmp_path / "answers")
    images = TaskImages(plan)
    answers, labels = read_answers(tmp_path / "answers")
    try:
        for task, answer in zip(plan.tasks, answers, strict=True):
            support, support_labels, query = images.cut(task)
            data = collection.datasets[task.dataset].images
            assert np.array_equal(support, data[plan.window("support_index", task)])
            assert np.array_equal(query, data[plan.window("query_index", task)])
            window = labels[answer.query_offset : answer.query_offset + answer.n_query]
            assert np.bincount(window, minlength=task.n_ways).min() > 0  # every way has queries
            assert (np.bincount(support_labels, minlength=task.n_ways).tolist()
                    == [task.n_shots] * task.n_ways)
    finally:
        images.close()
