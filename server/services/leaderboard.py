"""Leaderboard: one entry per participant (per league), by the phase's rule and ranking — per
team for members of a team (issue 23): the team's name and the entry's method are shown.

Which submission represents a participant: the one they selected (if it finished), else the
phase rule — `best` (highest score) or `latest` (most recent finished). Baseline submissions
(flagged by an organizer) each get their own entry, marked. A submission's score aggregates its
current runs by the phase's rule (`services.scores`, MetaDL's per-dataset minimum by default);
its per-dataset values are those minima, its CI the ranked quantity's 95% interval in its worst
run (NovelGen's on an id-ood board ranked by NovelGen, not all tasks').

Ranking is `score` (higher first) or `average_rank` across datasets (lower first), both from
submission_api.scoring.ranking; ties go to the earlier submission — for a submission carried
into a final phase, the time of the original upload.

Ranking and details are two steps so that a page of the board reads only its own rows' run
summaries: `rank_leaderboard` orders every entry, `build_entries` completes the ones shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import BindParameter, ColumnElement, Select, and_, bindparam, select
from sqlalchemy.orm import Session, aliased

from server.models import Phase, Run, Submission, Team, User
from server.services.scores import (
    ProtocolOrScoring,
    aggregate_runs,
    compute_phase_scoring,
    compute_phase_sides,
    lower_is_better,
    phase_scoring,
)
from submission_api.scoring.ranked_tasks import compute_metric_ci95s, compute_metric_interval
from submission_api.scoring.ranking import compute_average_rank, rank_by_score


@dataclass(frozen=True)
class Entry:
    rank: int
    username: str
    submission_id: int
    score: float
    created_at: datetime
    user_id: int = 0
    league: str | None = None
    ci95: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    per_dataset: dict[str, float] = field(default_factory=dict)
    average_rank: float | None = None
    is_baseline: bool = False
    is_selected: bool = False
    sides: dict[str, float] = field(default_factory=dict)
    team: str | None = None
    method: str = ""


def candidate_select() -> Select[*tuple[Any, ...]]:
    """The columns of a `Candidate` (and their joins), before any filter: `_candidates` keeps
    a phase's finished, scored, qualified submissions; `leaderboard_delta` reads changed rows."""
    origin = aliased(Submission)
    return (
        select(Submission.id, Submission.user_id, Submission.score, Submission.created_at,
               Submission.league, Submission.is_baseline, Submission.is_selected,
               User.username, origin.created_at.label("origin_at"), Submission.team_id,
               Team.name.label("team_name"), Submission.method_name)
        .join(User, User.id == Submission.user_id)
        .outerjoin(Team, Team.id == Submission.team_id)
        .outerjoin(origin, origin.id == Submission.carried_from_id))


def candidate_filter(league: str | None) -> ColumnElement[bool]:
    """What makes a submission of a phase stand on its board (of `league` when given)."""
    keep = and_(Submission.state == "finished", Submission.score.is_not(None),
                Submission.disqualified_at.is_(None))
    return keep if league is None else and_(keep, Submission.league == league)


def _candidates(session: Session, phase: Phase, league: str | None) -> list[Any]:
    query = candidate_select().where(Submission.phase_id == phase.id, candidate_filter(league))
    # Core, not the ORM: plain columns need none of its row processing, which was a third of
    # ranking 10,000 rows after a change (issue 38.4, benchmarks/bench_board_after_change.py);
    # plain named tuples, whose fields read ~5x faster than a Row's in the passes that follow
    return list(map(Candidate._make, session.connection().execute(query).all()))


class Candidate(NamedTuple):
    """A finished submission that may stand on the board (`_candidates`' columns)."""

    id: int
    user_id: int
    score: float
    created_at: datetime
    league: str | None
    is_baseline: bool
    is_selected: bool
    username: str
    origin_at: datetime | None
    team_id: int | None
    team_name: str | None
    method_name: str | None


def tie_key(row: Any) -> tuple[datetime, int]:
    """Ties go to the earlier submission (a carried one's original upload), then the lower id."""
    return (row.origin_at or row.created_at, row.id)


def choose_entries(rows: list[Any], rule: str) -> list[Any]:
    """The representative rows: selected, else by rule, per team or user; every baseline."""
    chosen: dict[tuple[str, int], Any] = {}
    baselines = []
    for row in rows:
        if row.is_baseline:
            baselines.append(row)
            continue
        key = entry_key(row)
        current = chosen.get(key)
        if current is None or _prefer(row, current, rule):
            chosen[key] = row
    return list(chosen.values()) + baselines


def entry_key(row: Any) -> tuple[str, int]:
    """Whom a row's entry stands for: each baseline its own, else the team, else the user."""
    if row.is_baseline:
        return ("baseline", row.id)
    team = getattr(row, "team_id", None)
    return ("team", team) if team is not None else ("user", row.user_id)


def choose_representative(rows: Iterable[Any], rule: str) -> Any:
    """The one row among a participant's (or team's) `rows` that stands on the board."""
    chosen = None
    for row in rows:
        if chosen is None or _prefer(row, chosen, rule):
            chosen = row
    return chosen


def _prefer(candidate: Any, current: Any, rule: str) -> bool:
    """True when `candidate` should replace `current` as the participant's entry."""
    if candidate.is_selected != current.is_selected:
        return bool(candidate.is_selected)
    if rule == "latest":
        return tie_key(candidate) > tie_key(current)
    return (-candidate.score, *tie_key(candidate)) < (-current.score, *tie_key(current))


SUMMARY_CHUNK = 5_000
"""Submission ids per query (their ids are written into the SQL as integer literals)."""


class Ranked(NamedTuple):
    """One ranked row before its details are read: position, candidate row, average rank,
    and its worst run's board summary when the ranking already needed it."""

    position: int
    row: Any
    average_rank: float | None
    summary: dict[str, Any] | None


def worst_run_summaries(session: Session, submission_ids: list[int],
                        protocol: ProtocolOrScoring = None) -> dict[int, dict[str, Any]]:
    """submission id -> what the board shows of its current finished runs, aggregated by the
    phase's rule: `{"ci95": worst run's, of the ranked metric, "per_dataset": {dataset: worst
    over runs}}`.

    Only the compact parts of each summary are read (`metric_cells`, `ci95`, the per-group
    intervals, and `per_dataset` for summaries stored before `metric_cells` existed): a whole
    summary is ~5 KB of JSON, and decoding 10,000 of them took half of a leaderboard request.
    The ids are rendered as literals: bound one by one, psycopg spent ~80 ms splitting the query
    of each chunk of 5,000 (benchmarks/bench_leaderboard.py).
    """
    scoring = compute_phase_scoring(protocol)
    by_submission: dict[int, list[Any]] = {}
    for start in range(0, len(submission_ids), SUMMARY_CHUNK):
        chunk = submission_ids[start:start + SUMMARY_CHUNK]
        ids: BindParameter[int] = bindparam("ids", chunk, expanding=True, literal_execute=True)
        runs = session.execute(
            select(Run.submission_id, Run.score, Run.index,
                   Run.summary["ci95"].as_float().label("ci95"),
                   Run.summary["metric_cells"].label("metric_cells"),
                   Run.summary["per_dataset"].label("per_dataset"),
                   Run.summary["per_group"].label("per_group"),
                   Run.summary["wacc_per_group"].label("wacc_per_group"))
            .where(Run.submission_id.in_(ids), Run.state == "finished",
                   Run.superseded_at.is_(None))
            .order_by(Run.submission_id, Run.index)).all()
        for run in runs:
            by_submission.setdefault(run.submission_id, []).append(_BoardRun(
                run.score, run.ci95,
                {"metric_cells": run.metric_cells, "per_dataset": run.per_dataset,
                 "ci95": run.ci95, "per_group": run.per_group,
                 "wacc_per_group": run.wacc_per_group}))
    out: dict[int, dict[str, Any]] = {}
    worst: dict[int, tuple[dict[str, Any], str]] = {}
    for sid, runs in by_submission.items():
        result = aggregate_runs(runs, scoring)
        worst[sid] = (runs[result.worst_run].summary, result.metric)
        out[sid] = {"per_dataset": result.per_dataset,
                    "sides": compute_phase_sides(runs, scoring)}
    # the interval of the quantity ranked (NovelGen, wAcc-A, ...), of the worst run; all at
    # once: one t quantile per entry made this most of a 1,000-entry board's time
    for sid, ci95 in zip(worst, compute_metric_ci95s(list(worst.values())), strict=True):
        out[sid]["ci95"] = ci95
        # the bounded interval the board shows (issue 36: ± ci95 undercovers near 1)
        out[sid]["ci95_bounds"] = compute_metric_interval(*worst[sid])
    return out


class _BoardRun(NamedTuple):
    score: float | None
    ci95: float | None
    summary: dict[str, Any]


def _per_dataset(summary: dict[str, Any]) -> dict[str, float]:
    table = summary.get("per_dataset") or {}
    return {name: float(value) for name, value in table.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


def rank_leaderboard(session: Session, phase: Phase, league: str | None = None) -> list[Ranked]:
    """Every entry of `phase` (of one league when given) in rank order, unhidden.

    Ranking by score reads no run summary; ranking by average rank reads every entry's (its
    per-dataset means decide), and keeps them so that `build_entries` does not read them again.
    """
    rows = choose_entries(_candidates(session, phase, league), phase.leaderboard_rule)
    by_id = {r.id: r for r in rows}
    higher = not lower_is_better(phase_scoring(phase))
    if (phase.leaderboard or {}).get("ranking") != "average_rank":
        ranked = rank_by_score([(r.id, tie_key(r), r.score) for r in rows], higher)
        return [Ranked(item.position, by_id[item.entry_id], None, None) for item in ranked]
    summaries = worst_run_summaries(session, list(by_id), phase_scoring(phase))
    per_dataset = {sid: _per_dataset(summaries.get(sid, {})) for sid in by_id}
    ranked = compute_average_rank([(r.id, tie_key(r), per_dataset[r.id]) for r in rows], higher)
    return [Ranked(item.position, by_id[item.entry_id], item.value,
                   summaries.get(item.entry_id, {})) for item in ranked]


def build_entries(session: Session, ranked: list[Ranked], details: bool = True,
                  protocol: ProtocolOrScoring = None) -> list[Entry]:
    """Entries of `ranked` (in its order), with the worst run's CI and the per-dataset minima
    over runs when `details` (one query for those whose summary was not read yet)."""
    missing = [r.row.id for r in ranked if r.summary is None] if details else []
    read = worst_run_summaries(session, missing, protocol) if missing else {}
    out = []
    for item in ranked:
        row = item.row
        summary = (item.summary if item.summary is not None else read.get(row.id, {})
                   ) if details else {}
        ci = summary.get("ci95")
        bounds = summary.get("ci95_bounds") or (None, None)
        out.append(Entry(
            rank=item.position, username=row.username, submission_id=row.id, score=row.score,
            created_at=row.created_at, user_id=row.user_id, league=row.league,
            ci95=float(ci) if isinstance(ci, int | float) else None,
            ci95_low=bounds[0], ci95_high=bounds[1],
            per_dataset=_per_dataset(summary), average_rank=item.average_rank,
            sides=dict(summary.get("sides") or {}),
            is_baseline=row.is_baseline, is_selected=row.is_selected,
            team=getattr(row, "team_name", None), method=getattr(row, "method_name", "") or ""))
    return out


def compute_leaderboard(session: Session, phase: Phase, league: str | None = None) -> list[Entry]:
    """The ranked entries of `phase` (of one league when given), unhidden: callers hide."""
    return build_entries(session, rank_leaderboard(session, phase, league),
                         protocol=phase_scoring(phase))
