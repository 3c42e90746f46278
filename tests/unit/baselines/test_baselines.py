"""Every starting-kit baseline is a complete submission: it imports, meta-trains on what its
config.json asks for, saves, loads into a fresh `MyLearner()` and predicts tasks of any ways and
shots with the right shape, deterministically; the learning ones beat chance on separable
classes and the random one does not."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from baseline_harness import (
    BASELINES,
    BASELINES_DIR,
    TEST_TASKS,
    Outcome,
    compute_normalized_accuracy,
    load_baseline,
    load_config,
    run_lifecycle,
)

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.config import load_submission_config

META_TRAINED_BASELINES = ("finetune", "protonet", "matchingnet", "fomaml")


@pytest.fixture(scope="module", autouse=True)
def quick_mode() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARENA_BASELINE_QUICK", "1")
        yield


@pytest.fixture(scope="module")
def default_lifecycle(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], Outcome]:
    """`run_lifecycle(name)` with its defaults (seed 0, no meta-valid generator), made once per
    baseline in this module: the outcome that several tests read, each a different fact of it."""
    made: dict[str, Outcome] = {}

    def get(name: str) -> Outcome:
        if name not in made:
            made[name] = run_lifecycle(name, tmp_path_factory.mktemp(name))
        return made[name]

    return get


@pytest.fixture(scope="module", params=BASELINES)
def outcome(request: pytest.FixtureRequest, default_lifecycle: Callable[[str], Outcome]) -> Outcome:
    return default_lifecycle(request.param)


@pytest.mark.parametrize("name", BASELINES)
def test_baseline_folder_is_a_submission_with_the_contract_classes(name: str) -> None:
    assert (BASELINES_DIR / name / "model.py").is_file()
    assert not (BASELINES_DIR / name / "__init__.py").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a baseline's config.json must parse without warnings
        parsed = load_submission_config(BASELINES_DIR / name)
    assert parsed.train_data_format == load_config(name)["train_data_format"]
    module = load_baseline(name)
    assert issubclass(module.MyMetaLearner, MetaLearner)
    assert issubclass(module.MyLearner, Learner)
    assert any(
        isinstance(value, type) and issubclass(value, Predictor) and value is not Predictor
        for value in vars(module).values()
    )
    module.MyLearner()  # the runner builds it with no arguments


def test_meta_fit_returns_the_modules_learner(outcome: Outcome) -> None:
    assert outcome.learner_type is not None
    assert issubclass(outcome.learner_type, Learner)
    assert outcome.learner_type.__name__ == "MyLearner"


def test_predictions_are_labels_or_scores_for_every_query(outcome: Outcome) -> None:
    tasks = zip(outcome.predictions, outcome.truths, outcome.ways, strict=True)
    for predictions, truth, n_ways in tasks:
        assert isinstance(predictions, np.ndarray)
        assert predictions.shape in {(len(truth),), (len(truth), n_ways)}
        if predictions.ndim == 1:
            assert np.issubdtype(predictions.dtype, np.integer)
            assert predictions.min() >= 0 and predictions.max() < n_ways
        else:
            assert np.isfinite(predictions).all()


@pytest.mark.parametrize("name", META_TRAINED_BASELINES)
def test_meta_training_logs_numpy_predictions_for_the_logged_data(
    name: str, default_lifecycle: Callable[[str], Outcome]
) -> None:
    outcome = default_lifecycle(name)
    assert outcome.logger.calls, "meta_fit never called self.log"
    for data, predictions, loss, meta_train in outcome.logger.calls:
        truth = data.query_set[1] if hasattr(data, "query_set") else data[1]
        assert isinstance(predictions, np.ndarray)
        assert len(predictions) == len(truth)
        assert loss is None or np.isfinite(loss)
        assert meta_train


@pytest.mark.parametrize("name", BASELINES)
def test_meta_fit_accepts_a_meta_valid_generator(name: str, tmp_path) -> None:
    outcome = run_lifecycle(name, tmp_path, with_validation=True)
    assert len(outcome.predictions) == len(TEST_TASKS)
    if name in {"protonet", "matchingnet"}:
        assert any(not meta_train for *_, meta_train in outcome.logger.calls)


@pytest.mark.parametrize("name", BASELINES)
def test_same_seed_gives_the_same_predictions(
    name: str, tmp_path, default_lifecycle: Callable[[str], Outcome]
) -> None:
    # The module's outcome at seed 0 (made once per module: in a whole run, earlier, with other
    # baselines and tests in between) and a fresh one at seed 0 now.
    first = default_lifecycle(name)
    second = run_lifecycle(name, tmp_path / "again", seed=0)
    assert len(first.predictions) == len(TEST_TASKS)
    for a, b in zip(first.predictions, second.predictions, strict=True):
        np.testing.assert_array_equal(a, b)


def test_learning_baselines_beat_chance_on_separable_classes(outcome: Outcome) -> None:
    # The random baseline is the chance level: on the same tasks it must stay below the bar
    # that every learning baseline clears.
    if outcome.name == "random":
        assert outcome.normalized_accuracy() < 0.5
    else:
        assert outcome.normalized_accuracy() > 0.5


def test_random_baseline_stays_near_chance(default_lifecycle: Callable[[str], Outcome]) -> None:
    outcome = default_lifecycle("random")
    labels = np.concatenate([p.argmax(1) if p.ndim == 2 else p for p in outcome.predictions])
    assert len(np.unique(labels)) > 2, "random predictions should not be constant"
    assert abs(outcome.normalized_accuracy()) < 0.3


def test_normalized_accuracy_helper_is_zero_at_chance_and_one_when_perfect() -> None:
    truth = np.array([0, 0, 1, 1])
    assert compute_normalized_accuracy(truth, truth, 2) == 1.0
    assert compute_normalized_accuracy(np.array([0, 1, 0, 1]), truth, 2) == 0.0
