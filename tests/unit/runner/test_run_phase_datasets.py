"""`arena run --protocol-file <the phase's JSON>` plans from the phase's datasets, as the
platform does (issue 32.5): it took the collection's split (10 tasks locally, 5 on the platform).
The local plan is compared with the worker's own planner (`worker.pipeline.prepare`) for the same
phase and test seed, and a real `arena run` scores the phase's task count."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

import starting_kit.cli as cli
from starting_kit.commands.phase_file import read_phase_splits
from starting_kit.sample_data import generate_collection
from submission_api.data import load_collection
from submission_api.data.collection import with_phase_splits
from submission_api.protocols import ProtocolParams
from submission_api.protocols.plans import plan_test_episodes
from worker.client import ClaimedRun
from worker.pipeline.prepare import build_collection

BASELINES = Path(cli.__file__).parent / "baselines"
PROTOCOL = {"name": "fixed", "n_ways": 3, "n_shots": 2, "n_queries": 3, "tasks_per_dataset": 5}


@pytest.fixture(scope="module")
def collection_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two meta-test datasets in meta_splits.txt (stripes trains); the phase tests one."""
    root = tmp_path_factory.mktemp("phase-data")
    return generate_collection(root / "data", n_classes=5, n_images=12,
                               domains=("stripes", "spectra", "mosaic"))


def _phase(collection_dir: Path, cache: Path) -> dict:
    """The phase as /api/v1/phases/{id} answers it: its protocol and datasets per role."""
    compiled = load_collection(collection_dir, cache).datasets
    ref = {name: {"name": name, "content_hash": compiled[name].content_hash}
           for name in compiled}
    return {"id": 7, "name": "feedback", "runs_per_submission": 1, "protocol": PROTOCOL,
            "data": {"collection": "data", "meta_train": [ref["stripes"]], "meta_valid": [],
                     "meta_test": [ref["mosaic"]]}}


def test_the_local_plan_is_the_platform_planners_for_the_same_phase(collection_dir, tmp_path):
    cache = tmp_path / "cache"
    phase = _phase(collection_dir, cache)
    path = tmp_path / "phase.json"
    path.write_text(json.dumps(phase))
    params = ProtocolParams.from_dict({"split_seed": 11, **PROTOCOL})
    local = with_phase_splits(load_collection(collection_dir, cache), read_phase_splits(path))
    claimed = ClaimedRun.model_validate({
        "run_id": 1, "fencing_token": 1, "lease_expires_at": datetime.now(UTC),
        "submission_sha256": "0" * 64, "protocol": PROTOCOL, "test_seed": 11,
        "participant_seed": 0, "time_limit_s": 60, "data": phase["data"]})
    compiled = load_collection(collection_dir, cache).datasets
    platform = build_collection(claimed, {n: compiled[n].root for n in ("stripes", "mosaic")})
    ours, theirs = plan_test_episodes(params, local, 11), plan_test_episodes(params, platform, 11)
    assert len(theirs) == 5 and {e.dataset for e in theirs} == {"mosaic"}
    assert [(e.dataset, e.n_ways, e.n_shots) for e in ours] == \
        [(e.dataset, e.n_ways, e.n_shots) for e in theirs]
    assert [(e.support_idx.tolist(), e.query_idx.tolist()) for e in ours] == \
        [(e.support_idx.tolist(), e.query_idx.tolist()) for e in theirs]


def test_arena_run_with_the_phase_file_scores_the_phases_tasks(collection_dir, tmp_path,
                                                                monkeypatch):
    monkeypatch.setenv("ARENA_BASELINE_QUICK", "1")
    cache = tmp_path / "cache"
    path = tmp_path / "phase.json"
    path.write_text(json.dumps(_phase(collection_dir, cache)))
    answer = CliRunner().invoke(cli.app, [
        "run", str(BASELINES / "random"), "--data", str(collection_dir), "--output",
        str(tmp_path / "out"), "--protocol-file", str(path), "--cache", str(cache),
        "--quiet", "--threads", "1"])
    assert answer.exit_code == 0, answer.output
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["n_tasks"] == 5  # the collection's split would give 10 (mosaic + spectra)


def test_a_phase_dataset_missing_from_the_data_folder_is_a_clear_error(collection_dir,
                                                                       tmp_path):
    with pytest.raises(ValueError, match="does not have.*pass --data"):
        with_phase_splits(load_collection(collection_dir, tmp_path / "c"),
                          {"meta-train": ["stripes"], "meta-test": ["omniglot"]})


def test_a_secret_phase_naming_no_test_dataset_keeps_the_collections_meta_test(collection_dir,
                                                                               tmp_path):
    phase = _phase(collection_dir, tmp_path / "c")
    phase["data"]["meta_test"] = []  # what a participant reads of a secret phase
    path = tmp_path / "phase.json"
    path.write_text(json.dumps(phase))
    splits = read_phase_splits(path)
    assert splits == {"meta-train": ["stripes"], "meta-valid": []}
    merged = with_phase_splits(load_collection(collection_dir, tmp_path / "c"), splits)
    assert merged.splits["meta-test"] == ["spectra", "mosaic"]
