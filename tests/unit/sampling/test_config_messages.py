"""config.json messages a participant reads (issue 14, local runs): an unchanged NeurIPS'22
config (fixed N beside null min_N/max_N) warns about nothing, and too many validation datasets
says which values work."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from submission_api.config import parse_submission_config
from submission_api.sampling.meta_train import split_validation_datasets

NEURIPS22_TRAIN_CONFIG = {"N": 5, "min_N": None, "max_N": None, "k": None, "min_k": 1,
                          "max_k": 20, "query_images_per_class": 20}


def test_an_unchanged_neurips22_config_warns_about_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_submission_config({"train_data_format": "task", "batch_size": 16,
                                 "validation_datasets": None,
                                 "train_config": NEURIPS22_TRAIN_CONFIG,
                                 "valid_config": NEURIPS22_TRAIN_CONFIG})


@pytest.mark.parametrize(("n_train", "works"), [(1, "use null (no meta-valid generator)"),
                                                (3, "use null, or 1 to 2")])
def test_too_many_validation_datasets_says_which_values_work(n_train, works):
    config = parse_submission_config({"validation_datasets": 3})
    with pytest.raises(ValueError, match=works.replace("(", r"\(").replace(")", r"\)")):
        split_validation_datasets([f"d{i}" for i in range(n_train)], [], config,
                                  np.random.default_rng(0))
