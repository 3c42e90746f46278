"""config.json read as the NeurIPS'22 starting kit reads it."""

from __future__ import annotations

import json

import pytest

from submission_api.config import (
    ConfigError,
    GeneratorConfig,
    SubmissionConfig,
    load_submission_config,
    parse_submission_config,
)


def test_missing_config_gives_the_kit_defaults(tmp_path):
    config = load_submission_config(tmp_path)
    assert config == SubmissionConfig()
    assert (config.train_data_format, config.batch_size, config.validation_datasets) == (
        "task", 16, None)
    assert config.train_config == GeneratorConfig(5, None, None, None, 1, 20, 20)
    assert config.valid_config == GeneratorConfig(None, 2, 20, None, 1, 20, 20)


def test_user_train_config_updates_defaults_key_by_key(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "train_data_format": "batch", "batch_size": 32, "validation_datasets": 2,
        "train_config": {"N": None, "min_N": 3, "max_N": 7, "k": 5},
    }))
    config = load_submission_config(tmp_path)
    assert config.train_data_format == "batch" and config.batch_size == 32
    assert config.validation_datasets == 2
    assert config.train_config == GeneratorConfig(None, 3, 7, 5, 1, 20, 20)
    shape = config.train_config.to_task_shape()
    assert (shape.n_ways, shape.min_ways, shape.max_ways, shape.n_shots) == (None, 3, 7, 5)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"train_data_format": "tasks"}, "train_data_format is 'tasks', expected one of"),
        ({"batch_size": 0}, "batch_size is 0, expected an integer >= 1"),
        ({"batch_size": True}, "batch_size is True"),
        ({"validation_datasets": "2"}, "validation_datasets is '2'"),
        ({"train_config": {"N": 1}}, r"train_config.N is 1, expected an integer >= 2"),
        ({"train_config": {"N": None}}, "N is null with min_N=None"),
        ({"valid_config": {"min_k": 5, "max_k": 2}}, "expected integers min_k <= max_k"),
        ({"train_config": [5]}, "train_config is list, expected an object"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_values_raise_a_clear_error(data, match):
    with pytest.raises(ConfigError, match=match):
        parse_submission_config(data)


def test_unknown_keys_are_warned_about():
    with pytest.warns(UserWarning, match="'learning_rate' is not known"):
        parse_submission_config({"learning_rate": 0.1})
    with pytest.warns(UserWarning, match="train_config.n_way is not a known key"):
        parse_submission_config({"train_config": {"n_way": 5}})


def test_fixed_N_taking_precedence_over_a_range_is_warned_about():
    with pytest.warns(UserWarning, match="N=5 takes precedence"):
        parse_submission_config({"train_config": {"min_N": 2, "max_N": 9}})


def test_invalid_json_is_a_config_error(tmp_path):
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_submission_config(tmp_path)


def test_what_the_kit_accepts_is_accepted_and_what_it_refuses_is_refused():
    """The kit's CompetitionDataLoader: min_N >= 1 (not 2), query_size <= 20; the ingestion:
    validation_datasets 0 means no validation datasets."""
    config = parse_submission_config({"validation_datasets": 0,
                                      "train_config": {"N": None, "min_N": 1, "max_N": 3}})
    assert config.validation_datasets == 0
    assert config.train_config.to_task_shape().min_ways == 1
    with pytest.raises(ConfigError, match="query_images_per_class is 21, expected at most 20"):
        parse_submission_config({"valid_config": {"query_images_per_class": 21}})
    with pytest.raises(ConfigError, match="validation_datasets is -1"):
        parse_submission_config({"validation_datasets": -1})
