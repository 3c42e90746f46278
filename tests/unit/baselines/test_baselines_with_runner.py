"""The baselines run end to end through the real local runner (`arena run`'s code path: bundle,
participant subprocess, scorer) on a tiny generated collection, in task mode (protonet) and in
batch mode (finetune). ARENA_BASELINE_QUICK=1 reaches the participant subprocess through its
environment, so each run takes seconds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from baseline_harness import BASELINES_DIR

from starting_kit.sample_data import generate_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.local import run_local

TASKS_PER_DATASET = 2


@pytest.fixture(scope="module")
def tiny_collection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARENA_BASELINE_QUICK", "1")
        root = tmp_path_factory.mktemp("collection")
        # 16 images per class: enough for protonet's 5-shot 10-query meta-train tasks.
        yield generate_collection(
            root / "data", n_classes=5, n_images=16, domains=("stripes", "spectra")
        )


@pytest.fixture(scope="module")
def compiled_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One dataset cache for both runs: the first compiles the collection, the second reads it."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("name", ["protonet", "finetune"])
def test_baseline_finishes_a_local_run_and_is_scored(
    name: str, tiny_collection: Path, compiled_cache: Path, tmp_path: Path
) -> None:
    protocol = ProtocolParams(
        name="fixed", n_ways=3, n_shots=2, n_queries=3, tasks_per_dataset=TASKS_PER_DATASET
    )
    result = run_local(
        BASELINES_DIR / name,
        tiny_collection,
        tmp_path / "out",
        protocol=protocol,
        seed=0,
        cache_dir=compiled_cache,
    )
    assert result.state == "finished", f"{result.reason}: {result.message}"
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["n_tasks"] == TASKS_PER_DATASET
    assert -1.0 <= scores["score"] <= 1.0
