"""A submission's score from its runs, as the phase defines it: the phase's protocol names the
ranking metric and the aggregation over runs, and `submission_api.scoring.aggregate` — the one
function that computes it, for worker, server and starting kit alike — does the arithmetic.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from submission_api.protocols import ProtocolParams, ProtocolParamsError
from submission_api.scoring.aggregate import (
    DEFAULT_AGGREGATION,
    LOWER_IS_BETTER,
    SubmissionScore,
    compute_sides,
    compute_submission_score,
    describe_aggregation,
)
from submission_api.scoring.summary import read_metric_cells

log = logging.getLogger("arena.scores")


def compute_phase_scoring(protocol: Mapping[str, Any] | None) -> tuple[str, str]:
    """(metric, aggregation) of a phase's stored protocol, parsed once per distinct protocol
    (a board asks for it per row). A protocol that does not parse gets the defaults, logged as
    an error for operators: phases are validated when stored, so only a row written by hand or
    by an older version can get there, and a leaderboard must still render."""
    return _parse_scoring(json.dumps(dict(protocol or {}), sort_keys=True, default=str))


@lru_cache(maxsize=256)
def _parse_scoring(key: str) -> tuple[str, str]:
    try:
        params = ProtocolParams.from_dict(json.loads(key))
    except (ProtocolParamsError, TypeError) as error:
        log.error("scores.protocol.unparsable", extra={"protocol": key[:500],
                                                       "error": str(error)})
        return "score", DEFAULT_AGGREGATION
    return params.ranking


def compute_run_cells(summary: Mapping[str, Any] | None, score: float | None) -> dict:
    """A run's metric cells; a run stored without a summary counts as one pseudo-dataset."""
    cells = read_metric_cells(dict(summary or {}))
    if not cells.get("score") and score is not None:
        cells["score"] = {"all": float(score)}
    return cells


def aggregate_runs(runs: Sequence[Any], protocol: Mapping[str, Any] | None) -> SubmissionScore:
    """The score of finished `runs` (objects with `summary` and `score`) under the phase's rule.

    A metric the runs do not report (a phase switched protocol after they ran) falls back to the
    plain score, so no stored result becomes unreadable.
    """
    metric, aggregation = compute_phase_scoring(protocol)
    cells = [compute_run_cells(getattr(r, "summary", None), r.score) for r in runs]
    try:
        return compute_submission_score(cells, metric, aggregation)
    except ValueError as error:
        log.warning("scores.metric.missing", extra={"metric": metric, "error": str(error)})
        return compute_submission_score(cells, "score", aggregation)


def explain_phase_score(protocol: Mapping[str, Any] | None, runs_per_submission: int) -> str:
    """The leaderboard's sentence on how a score is formed."""
    metric, aggregation = compute_phase_scoring(protocol)
    return describe_aggregation(runs_per_submission, aggregation, metric)


def lower_is_better(protocol: Mapping[str, Any] | None) -> bool:
    """True when the phase ranks by a metric where smaller is better (FewSTAB's wAcc gap)."""
    return compute_phase_scoring(protocol)[0] in LOWER_IS_BETTER


def compute_phase_sides(runs: Sequence[Any], protocol: Mapping[str, Any] | None
                        ) -> dict[str, float]:
    """The two-sided protocol's results (BaseGen/NovelGen, wAcc-A/wAcc-R/gap), each aggregated
    over the runs like the score; {} for other protocols."""
    name = str((protocol or {}).get("name", "cross-domain"))
    _, aggregation = compute_phase_scoring(protocol)
    cells = [compute_run_cells(getattr(r, "summary", None), r.score) for r in runs]
    return compute_sides(cells, name, aggregation)


def refresh_run_scores(runs: Sequence[Any], protocol: Mapping[str, Any] | None) -> None:
    """Set each finished run's `score` to its value of the phase's ranking metric (NovelGen for
    an id-ood phase, not the mean over every group)."""
    for run in runs:
        if run.state == "finished" and run.summary:
            run.score = aggregate_runs([run], protocol).score
