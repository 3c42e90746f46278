"""NeurIPS'22 any-way any-shot tasks draw for draw as the kit's `CompetitionDataLoader`
(cdmetadl/ingestion/data_generator.py @cff7840), transcribed below with a NumPy Generator in
place of its RandomState (`randint(a, b)` -> `integers(a, b)`)."""

from __future__ import annotations

import numpy as np
import pytest

from submission_api.sampling import TaskShape, compute_shared_pools, make_rng, sample_n_way_k_shot


def kit_prepare_task_config(rng, cfg, max_ways, max_shots):
    """`CompetitionDataLoader.prepare_task_config`, line by line."""
    n_way = cfg["N"]
    if n_way is None:
        if cfg["max_N"] < max_ways:
            max_ways = cfg["max_N"]
        if cfg["min_N"] > max_ways:
            ways_variability = cfg["max_N"] - cfg["min_N"]
            min_ways = max_ways - ways_variability
            if min_ways < 2:
                min_ways = 2
        else:
            min_ways = cfg["min_N"]
        n_way = rng.integers(min_ways, max_ways + 1)
    elif n_way > max_ways:
        n_way = max_ways
    k_shot = cfg["k"]
    if k_shot is None:
        if cfg["max_k"] < max_shots:
            max_shots = cfg["max_k"]
        if cfg["min_k"] > max_shots:
            shots_variability = cfg["max_k"] - cfg["min_k"]
            min_shots = max_shots - shots_variability
            if min_shots < 1:
                min_shots = 1
        else:
            min_shots = cfg["min_k"]
        k_shot = rng.integers(min_shots, max_shots + 1)
    elif k_shot > max_shots:
        k_shot = max_shots
    return int(n_way), int(k_shot)


def kit_task(rng, cfg, idx_per_label):
    """`CompetitionDataLoader.create_support_and_query_sets`, indices in place of images."""
    num_classes = len(idx_per_label)
    min_examples_per_class = min(len(v) for v in idx_per_label)
    q = cfg["query_images_per_class"]
    n_way, k_shot = kit_prepare_task_config(rng, cfg, num_classes, min_examples_per_class - q)
    support_size = n_way * k_shot
    idx_per_class = []
    classes = rng.permutation(num_classes)[:n_way]
    for c in classes:
        idx_per_class.append(rng.choice(idx_per_label[c], k_shot + q, replace=False))
    idx = np.stack(idx_per_class).T.reshape(-1)
    labels = np.tile(np.arange(n_way), k_shot + q)
    support_x, support_y = idx[:support_size], labels[:support_size]
    query_x, query_y = idx[support_size:], labels[support_size:]
    shuffle_support = rng.permutation(support_size)
    shuffle_query = rng.permutation(len(query_x))
    return (n_way, k_shot, classes, support_x[shuffle_support], support_y[shuffle_support],
            query_x[shuffle_query], query_y[shuffle_query])


TEST_CONFIG = {"N": None, "min_N": 2, "max_N": 20, "k": None, "min_k": 1, "max_k": 20,
               "query_images_per_class": 20}
TRAIN_CONFIG = {"N": 5, "min_N": None, "max_N": None, "k": None, "min_k": 1, "max_k": 20,
                "query_images_per_class": 20}
NARROW = {"N": None, "min_N": 8, "max_N": 12, "k": None, "min_k": 10, "max_k": 15,
          "query_images_per_class": 10}


def _shape(cfg):
    return TaskShape(cfg["N"], cfg["min_N"] or 2, cfg["max_N"] or 20, cfg["k"], cfg["min_k"],
                     cfg["max_k"], cfg["query_images_per_class"])


@pytest.mark.parametrize(
    ("cfg", "sizes"),
    [(TEST_CONFIG, [40] * 25),            # Meta-Album: k <= 20, N <= 20
     (TEST_CONFIG, [40] * 12 + [27, 60]),  # one 27-image class bounds every task's k by 7
     (TRAIN_CONFIG, [40] * 8 + [33]),
     (NARROW, [30] * 6 + [24]),            # min_N and min_k above what the dataset allows
     ],
)
def test_tasks_are_the_kits_draw_for_draw(make_dataset, cfg, sizes):
    ds = make_dataset("d", sizes)
    pools = compute_shared_pools(ds.labels, len(sizes))
    for seed in range(300):
        ep = sample_n_way_k_shot(pools, make_rng(seed), "d", _shape(cfg))
        n_way, k_shot, classes, sx, sy, qx, qy = kit_task(make_rng(seed), cfg, pools.support)
        assert (ep.n_ways, ep.n_shots) == (n_way, k_shot)
        assert ep.class_ids.tolist() == classes.tolist()
        assert ep.support_idx.tolist() == sx.tolist() and ep.support_labels.tolist() == sy.tolist()
        assert ep.query_idx.tolist() == qx.tolist() and ep.query_labels.tolist() == qy.tolist()


def test_the_smallest_class_of_the_dataset_bounds_k_even_when_not_chosen(make_dataset):
    """Kit: k <= min_examples_per_class - 20, drawn before the classes."""
    sizes = [40] * 20 + [25]
    ds = make_dataset("d", sizes)
    pools = compute_shared_pools(ds.labels, len(sizes))
    rng = make_rng(9)
    shots = [sample_n_way_k_shot(pools, rng, "d", _shape(TEST_CONFIG)).n_shots
             for _ in range(300)]
    assert max(shots) == 5 and min(shots) == 1
