"""ProtocolParams: defaults, validation, JSON round trip."""

from __future__ import annotations

import json

import pytest

from submission_api.protocols import PROTOCOLS, ProtocolParams, ProtocolParamsError


@pytest.mark.parametrize(
    ("name", "tasks", "shape"),
    [("cross-domain", 100, (None, None, None)), ("meta-dataset", 600, (None, None, None)),
     ("fixed", 100, (5, 5, 15)), ("within-domain", 100, (5, 5, 20)),
     ("id-ood", 100, (5, 1, 5)), ("fewstab", 100, (5, 1, 15))],
)
def test_defaults_are_filled_per_protocol(name, tasks, shape):
    params = ProtocolParams(name=name)
    assert params.tasks_per_dataset == tasks
    assert (params.n_ways, params.n_shots, params.n_queries) == shape


@pytest.mark.parametrize(
    ("name", "rule"),
    [("cross-domain", "min_of_run_means"), ("within-domain", "per_dataset_min"),
     ("fixed", "min_of_run_means"), ("meta-dataset", "min_of_run_means"),
     ("id-ood", "min_of_run_means"), ("fewstab", "min_of_run_means")],
)
def test_each_protocol_aggregates_runs_by_its_sources_rule(name, rule):
    """NeurIPS'22 (cross-domain): "the lowest of the three runs" of run means; MetaDL'21
    (within-domain): per dataset the minimum of the 3 runs; the others' sources run once."""
    assert ProtocolParams(name=name).aggregation == rule
    assert ProtocolParams(name=name, aggregation="per_dataset_min").aggregation == (
        "per_dataset_min")


@pytest.mark.parametrize("shots", [1, 5])
def test_fewstab_thresholds_are_the_shot_count_and_15_queries(shots):
    """Reference `SpuriousTask(n_s=shots, n_q=15)`: n_s is the task's shot count, not 5."""
    params = ProtocolParams(name="fewstab", n_shots=shots)
    assert (params.fewstab_n_s, params.fewstab_n_q) == (shots, 15)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_dict_round_trip_through_json(name):
    params = ProtocolParams(name=name, tasks_per_dataset=7, datasets=("a", "b"), split_seed=3)
    again = ProtocolParams.from_dict(json.loads(json.dumps(params.to_dict())))
    assert again == params


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"name": "cross_domain"}, "unknown; expected one of"),
     ({"n_ways": 5}, "draws its own task shape but got n_ways=5"),
     ({"name": "fixed", "n_ways": 1}, "n_ways=1, expected an integer >= 2"),
     ({"tasks_per_dataset": 0}, "tasks_per_dataset=0"),
     ({"held_out_fraction": 1.0}, r"expected a number in \(0, 1\)"),
     ({"split_fractions": (0.8, 0.15, 0.15)}, "summing to 1"),
     ({"split_fractions": (0.5, 0.5)}, "expected \\(train, valid, test\\)"),
     ({"name": "fewstab", "n_shots": 3}, r"expected one of \(1, 5\)"),
     ({"name": "fewstab", "metric": "wAcc-gap"}, "has no source .* a learner at chance wins"),
     ({"name": "fewstab", "n_shots": 5, "fewstab_n_s": 2}, "expected n_s >= n_shots")],
)
def test_invalid_values_raise_clear_errors(kwargs, match):
    with pytest.raises(ProtocolParamsError, match=match):
        ProtocolParams(**kwargs)


def test_unknown_keys_in_a_stored_dict_are_an_error():
    with pytest.raises(ProtocolParamsError, match=r"\['n_way'\] are unknown"):
        ProtocolParams.from_dict({"name": "fixed", "n_way": 5})
