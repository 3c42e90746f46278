"""The server scores a submission with the one aggregation function, by the phase's rule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from server.services.scores import aggregate_runs, explain_phase_score, lower_is_better
from server.services.submissions import derive_state


def run(cells, index=0):
    means = [v for side in cells.values() for v in side.values()]
    return SimpleNamespace(state="finished", score=sum(means) / len(means), reason=None,
                           index=index, message=None, summary={"metric_cells": cells})


RUNS = [run({"score": {"a": 0.9, "b": 0.2}}, 0), run({"score": {"a": 0.3, "b": 0.8}}, 1)]


def test_each_protocol_scores_by_its_sources_rule_by_default():
    """NeurIPS'22 cross-domain: the lowest run mean; MetaDL'21 within-domain: per-dataset min."""
    assert derive_state(RUNS, {"name": "cross-domain"})[3] == pytest.approx(0.55)
    assert derive_state(RUNS, {"name": "within-domain"})[3] == pytest.approx(0.25)


def test_a_phase_may_choose_the_other_rule():
    protocol = {"name": "cross-domain", "aggregation": "per_dataset_min"}
    assert derive_state(RUNS, protocol)[3] == pytest.approx(0.25)


def test_id_ood_submissions_score_novelgen_unless_the_phase_says_otherwise():
    runs = [run({"score": {"tr": 0.9, "te": 0.1}, "BaseGen": {"tr": 0.9},
                 "NovelGen": {"te": 0.1}})]
    assert aggregate_runs(runs, {"name": "id-ood"}).score == pytest.approx(0.1)
    base = {"name": "id-ood", "metric": "BaseGen"}
    assert aggregate_runs(runs, base).score == pytest.approx(0.9)


def test_the_fewstab_gap_ranks_lower_first_and_the_board_says_how_it_scores():
    assert not lower_is_better({"name": "fewstab"})  # the gap, lower better, never ranks
    assert "lowest of 3 runs' mean" in explain_phase_score({}, 3)
    assert "NeurIPS'22 Cross-Domain MetaDL's rule" in explain_phase_score({}, 3)
    assert "MetaDL'21's rule" in explain_phase_score({"name": "within-domain"}, 3)
