"""A submission's score from its runs, as the phase defines it: the phase's protocol names the
ranking metric and the aggregation over runs, and `submission_api.scoring.aggregate` — the one
function that computes it, for worker, server and starting kit alike — does the arithmetic.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from server.domain.phase import PhaseRulesError, parse_protocol
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


class PhaseScoring(NamedTuple):
    """How a phase ranks: its protocol's name, ranking metric and aggregation over runs."""

    protocol: str
    metric: str
    aggregation: str


ProtocolOrScoring = Mapping[str, Any] | PhaseScoring | None
"""A stored protocol (parsed on each call) or its scoring parsed once (`phase_scoring`)."""
_BY_PHASE: weakref.WeakKeyDictionary[Any, tuple[Any, PhaseScoring]] = (
    weakref.WeakKeyDictionary())


def phase_scoring(phase: Any) -> PhaseScoring:
    """The scoring of a `Phase` row, parsed once per row object and protocol (a page asks for
    it per entry and per statistic): a reassigned protocol is parsed afresh."""
    cached = _BY_PHASE.get(phase)
    if cached is not None and cached[0] is phase.protocol:
        return cached[1]
    scoring = compute_phase_scoring(phase.protocol)
    _BY_PHASE[phase] = (phase.protocol, scoring)
    return scoring


def compute_phase_scoring(protocol: ProtocolOrScoring) -> PhaseScoring:
    """The scoring of a phase's stored protocol (passed through when parsed already). A
    protocol that does not parse gets the defaults, logged as an error for operators: phases
    are validated when stored (server/domain/phase.py), so only a row written by hand or by an
    older version can get there, and a leaderboard must still render."""
    if isinstance(protocol, PhaseScoring):
        return protocol
    try:
        params = parse_protocol(protocol)
    except PhaseRulesError as error:
        log.error("scores.protocol.unparsable", extra={"protocol": str(protocol)[:500],
                                                       "error": str(error)})
        name = str((protocol or {}).get("name", "cross-domain"))
        return PhaseScoring(name, "score", DEFAULT_AGGREGATION)
    return PhaseScoring(params.name, *params.ranking)


def compute_run_cells(summary: Mapping[str, Any] | None,
                      score: float | None) -> dict[str, dict[str, float]]:
    """A run's metric cells; a run stored without a summary counts as one pseudo-dataset."""
    cells = read_metric_cells(dict(summary or {}))
    if not cells.get("score") and score is not None:
        cells["score"] = {"all": float(score)}
    return cells


def aggregate_runs(runs: Sequence[Any], protocol: ProtocolOrScoring) -> SubmissionScore:
    """The score of finished `runs` (objects with `summary` and `score`) under the phase's rule.

    A metric the runs do not report (a phase switched protocol after they ran) falls back to the
    plain score, so no stored result becomes unreadable.
    """
    _, metric, aggregation = compute_phase_scoring(protocol)
    cells = [compute_run_cells(getattr(r, "summary", None), r.score) for r in runs]
    try:
        return compute_submission_score(cells, metric, aggregation)
    except ValueError as error:
        log.warning("scores.metric.missing", extra={"metric": metric, "error": str(error)})
        return compute_submission_score(cells, "score", aggregation)


def explain_phase_score(protocol: ProtocolOrScoring, runs_per_submission: int) -> str:
    """The leaderboard's sentence on how a score is formed."""
    _, metric, aggregation = compute_phase_scoring(protocol)
    return describe_aggregation(runs_per_submission, aggregation, metric)


def lower_is_better(protocol: ProtocolOrScoring) -> bool:
    """True when the phase ranks by a metric where smaller is better (FewSTAB's wAcc gap)."""
    return compute_phase_scoring(protocol).metric in LOWER_IS_BETTER


def compute_phase_sides(runs: Sequence[Any], protocol: ProtocolOrScoring
                        ) -> dict[str, float]:
    """The two-sided protocol's results (BaseGen/NovelGen, wAcc-A/wAcc-R/gap), each aggregated
    over the runs like the score; {} for other protocols."""
    name, _, aggregation = compute_phase_scoring(protocol)
    cells = [compute_run_cells(getattr(r, "summary", None), r.score) for r in runs]
    return compute_sides(cells, name, aggregation)


def refresh_run_scores(runs: Sequence[Any], protocol: ProtocolOrScoring) -> None:
    """Set each finished run's `score` to its value of the phase's ranking metric (NovelGen for
    an id-ood phase, not the mean over every group)."""
    scoring = compute_phase_scoring(protocol)
    for run in runs:
        if run.state == "finished" and run.summary:
            run.score = aggregate_runs([run], scoring).score
