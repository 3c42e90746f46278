"""Local parity (issue 12, item 6): `arena run` evaluates with a phase's published protocol —
shape, task count, ranking metric, aggregation and number of runs — from a file or flags."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import starting_kit.cli as cli
from submission_api.protocols import ProtocolParamsError
from submission_api.protocols.published import compute_local_protocol, read_published_protocol

PHASE = {"id": 3, "name": "final", "runs_per_submission": 3,
         "protocol": {"name": "fixed", "n_ways": 10, "n_shots": 2, "n_queries": 7,
                      "tasks_per_dataset": 40, "aggregation": "min_of_run_means"}}


def test_the_phase_as_the_api_shows_it_gives_its_protocol_and_runs(tmp_path):
    path = tmp_path / "phase.json"
    path.write_text(json.dumps(PHASE))
    published, runs = read_published_protocol(path)
    params = compute_local_protocol(published, {"tasks_per_dataset": None}, phase_seed=4)
    assert runs == 3
    assert (params.n_ways, params.n_shots, params.n_queries) == (10, 2, 7)
    assert (params.tasks_per_dataset, params.split_seed) == (40, 4)
    assert params.aggregation == "min_of_run_means"


def test_flags_override_the_file_and_bare_yaml_parameters_work(tmp_path):
    path = tmp_path / "protocol.yaml"
    path.write_text("name: id-ood\ntasks_per_dataset: 5\n")
    published, runs = read_published_protocol(path)
    params = compute_local_protocol(published, {"metric": "BaseGen+NovelGen"}, phase_seed=0)
    assert runs is None and params.metric == "BaseGen+NovelGen" and params.n_ways == 5


def test_a_file_that_is_no_mapping_is_a_clear_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("- fixed\n")
    with pytest.raises(ProtocolParamsError, match="expected a mapping"):
        read_published_protocol(path)


def test_arena_run_runs_the_phase_runs_and_aggregates_them_like_the_phase(tmp_path, monkeypatch):
    calls = []

    class Result:
        state = "finished"

        def __init__(self, index):
            cells = {"score": {"a": [0.9, 0.3, 0.6][index], "b": [0.2, 0.8, 0.6][index]}}
            self.scores = {"summary": {"metric_cells": cells}}

    def fake_run_local(submission, data, target, *, protocol, seed, phase_seed, **_):
        calls.append((protocol, seed, phase_seed, target.name))
        return Result(seed)

    monkeypatch.setattr("submission_api.runner.local.run_local", fake_run_local)
    phase = tmp_path / "phase.json"
    phase.write_text(json.dumps({**PHASE, "protocol": {**PHASE["protocol"],
                                                       "aggregation": "per_dataset_min"}}))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model.py").write_text("class MyMetaLearner: ...\nclass MyLearner: ...\n")
    answer = CliRunner().invoke(cli.app, ["run", str(tmp_path / "sub"), "--data", str(tmp_path),
                                          "--output", str(tmp_path / "out"), "--protocol-file",
                                          str(phase), "--shots", "3", "--quiet"])
    assert answer.exit_code == 0, answer.output
    assert [(c[1], c[3]) for c in calls] == [(0, "run-0"), (1, "run-1"), (2, "run-2")]
    assert {c[2] for c in calls} == {0} and calls[0][0].n_shots == 3 and calls[0][0].n_ways == 10
    total = json.loads((tmp_path / "out" / "submission_score.json").read_text())
    assert total["score"] == pytest.approx(0.25) and total["aggregation"] == "per_dataset_min"
