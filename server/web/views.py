"""View models of the pages, built from the table models and the services' read helpers.

Nothing here decides a rule: ranks come from `compute_leaderboard`, queue positions from the
same ordering as `queue_position`, visibility from `visible_phase`/`get_visible_submission`.
This module only gathers what a page shows (confidence intervals and per-dataset means of the
run that gave a submission its score, phase facts in words).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.models import Competition, Phase, Run, Submission, TeamMember, User, utcnow
from server.schemas.submission import RunResultOut, coarse_progress
from server.services.leaderboard_stats import compare_with_entry_above, compare_with_previous
from server.services.leaderboard_view import view_leaderboard
from server.services.participation import may_submit
from server.services.pools import phase_serving
from server.services.quotas import quota_left
from server.services.secrecy import (
    FULL,
    OwnerView,
    redact_run,
    results_state,
    served_log,
    test_data_level,
)
from server.services.tenancy import organizes_competition, visible_competitions_query
from server.services.timeline import (
    competition_timeline,
    effective_status,
    format_duration,
    format_limit,
    next_step,
)
from server.web.entry import entry_of


def visible_competitions(session: Session, user: User | None, now: datetime | None = None, *,
                         competition_id: int | None = None, limit: int | None = None,
                         offset: int = 0) -> list[dict[str, Any]]:
    """Competitions with the phases `user` may see (drafts for their organizers only: services/
    tenancy.py), each phase with its timeline step at `now` (effective status, countdown) in
    the order the phases happen. Only `competition_id` when given; else `limit` of them from
    `offset` (the home page asks one more than it shows, to know whether a next page exists)."""
    query = visible_competitions_query(user)
    if competition_id is not None:
        query = query.where(Competition.id == competition_id)
    if limit is not None:
        query = query.limit(limit).offset(offset)
    organized = [(c, organizes_competition(user, c)) for c in session.execute(query).scalars()]
    shown = [(c, [p for p in c.phases if staff or p.status != "draft"], staff)
             for c, staff in organized]
    return [{"competition": c, "phases": ps, "steps": competition_timeline(ps, now or utcnow()),
             "may_submit": may_submit(session, c, user)}
            for c, ps, staff in shown if ps or staff]


TEST_DATA_WORDS = {
    "public": "public: your code's logs and errors are shown to you whole",
    "feedback": "feedback: scores and per-task results are shown; what your code writes or "
                "raises while meta-testing is not (meta-training logs are)",
    "secret": "secret: what your code writes or raises while meta-testing is not shown, and "
              "scores and per-task results wait until the organizers publish them"}
RESULTS_WORDS = {"shown": "shown as soon as a run is scored",
                 "withheld": "withheld until the organizers publish them",
                 "published": "published by the organizers"}


def phase_facts(phase: Phase, now: datetime | None = None) -> list[tuple[str, str]]:
    """The rules of a phase in words, for its page (status as of `now`, dates included)."""
    protocol = (phase.protocol or {}).get("name", "cross-domain")
    quotas = [f"{n} {what}" for n, what in ((phase.quota_per_day, "per day"),
                                            (phase.quota_total, "in total"),
                                            (phase.quota_in_flight, "in flight at once"))
              if n is not None]
    runs = phase.runs_per_submission
    facts = [
        ("Status", effective_status(phase, now or utcnow())),
        ("Opens", _when(phase.starts_at, "when opened")),
        ("Closes", _when(phase.ends_at, "no end date")),
        ("Protocol", protocol),
        ("Runs per submission", f"{runs} (score = worst run)" if runs > 1 else "1"),
        ("Time limit", f"{format_limit(phase.time_limit_s)} per run"),
        ("Quota", ", ".join(quotas) or "none"),
        ("Leaderboard", f"{phase.leaderboard_rule} submission per participant"),
        ("Logs", "hidden from participants" if phase.hide_logs else "shown to their owner"),
        ("Test data", TEST_DATA_WORDS[test_data_level(phase)]),
        ("Results", RESULTS_WORDS[results_state(phase)]),
    ]
    return facts


def phase_context(session: Session, phase: Phase, user: User | None,
                  now: datetime) -> dict[str, Any]:
    """What the phase and submit pages show beside the facts: the competition's timeline,
    this phase's step and the one after it, and the viewer's quota left in words."""
    timeline = competition_timeline(
        [p for p in phase.competition.phases
         if organizes_competition(user, phase.competition) or p.status != "draft"], now)
    step = next((s for s in timeline if s.phase.id == phase.id), None) \
        or competition_timeline([phase], now)[0]
    entry = entry_of(session, phase.competition, user)
    quota = quota_left(session, user.id, phase, now) \
        if user is not None and entry.may_submit else None  # no quota before one may submit
    return {"timeline": timeline, "step": step, "next": next_step(phase, timeline),
            "quota": quota_words(quota, now), "quota_spent": quota_spent(quota),
            "entry": entry, "may_submit": entry.may_submit,
            "serving": phase_serving(session, phase, user, now)}


def quota_words(quota: dict[str, Any] | None, now: datetime) -> str:
    """`3 of 5 left today (resets in 4 h 10 min, 00:00 UTC), 18 of 20 in total`, or ''."""
    if quota is None:
        return ""
    parts = []
    if quota["per_day"] is not None:
        left, limit = quota["per_day"]
        resets = quota["resets_at"]
        parts.append(f"{left} of {limit} left today (resets in "
                     f"{format_duration((resets - now).total_seconds())}, at 00:00 UTC)")
    if quota["total"] is not None:
        parts.append(f"{quota['total'][0]} of {quota['total'][1]} left in total")
    if quota["in_flight"] is not None:
        parts.append(f"{quota['in_flight'][0]} of {quota['in_flight'][1]} more may wait or "
                     "run at once")
    return ", ".join(parts)


def quota_spent(quota: dict[str, Any] | None) -> bool:
    """True when one of the quotas has no submission left (the upload would be refused)."""
    return quota is not None and any(
        quota[k] is not None and quota[k][0] == 0 for k in ("per_day", "total", "in_flight"))


def submission_standing(session: Session, phase: Phase, submission: Submission,
                        sees_all: bool) -> dict[str, Any]:
    """Where a finished submission stands, for its page: the CI of the run that gave its score,
    and its rank on the leaderboard as this viewer may see it (None when another submission of
    the owner represents them, or the organizers hide ranks)."""
    runs = [r for r in submission.runs if r.superseded_at is None and r.state == "finished"]
    scoring = next((r for r in runs if r.score == submission.score), runs[0] if runs else None)
    summary = (scoring.summary or {}) if scoring is not None else {}
    out: dict[str, Any] = {"ci95": summary.get("ci95"), "n_tasks": summary.get("n_tasks"),
           "run_index": scoring.index if scoring is not None else None,
           "rank": None, "total": None, "on_board": False}
    if submission.state != "finished" or submission.score is None:
        return out
    board = view_leaderboard(session, phase, phase.competition, submission.league, sees_all,
                             offset=0, limit=0, user_id=submission.user_id)
    row = next((r for r in board["pinned"] if r["submission_id"] == submission.id), None)
    out["total"] = board["total"]
    if row is not None:
        out |= {"on_board": True, "rank": row["rank"]}
    if row is not None and board["statistics"]:
        out["vs_above"] = compare_with_entry_above(session, phase, board["league"], submission.id)
    if board["statistics"]:
        out["vs_previous"] = compare_with_previous(session, submission)
    return out


def served_run(run: Run, view: OwnerView) -> Run | SimpleNamespace:
    """A run as the page shows it to this viewer (services/secrecy.py): the table model itself
    for organizers, else its served fields with the log and live tail the owner may read."""
    if view is FULL:
        return run
    fields = redact_run(RunResultOut.model_validate(run).model_dump(), view)
    fields["log"] = served_log(run, view)
    fields["progress"] = run.progress if view.meta_test_text else coarse_progress(run.progress)
    return SimpleNamespace(**fields)


def boarded_submissions(session: Session, phase_ids: set[int], user: User) -> set[int]:
    """Ids of the submissions that stand for `user` (or their team) on their phases'
    leaderboards (the selected one, else the best or latest by the phase's rule), as the board
    computes it."""
    found: set[int] = set()
    teams = frozenset(session.execute(select(TeamMember.team_id).where(
        TeamMember.user_id == user.id)).scalars())
    for phase_id in phase_ids:
        phase = session.get_one(Phase, phase_id)
        board = view_leaderboard(session, phase, phase.competition, None, True, offset=0,
                                 limit=0, user_id=user.id, team_ids=teams)
        found |= {row["submission_id"] for row in board["pinned"]}
    return found


def _when(value: datetime | None, otherwise: str) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else otherwise


@dataclass(frozen=True)
class Board:
    """One leaderboard table: the whole phase, or one league of it (rows as the JSON API's)."""

    title: str
    description: str
    hidden: str
    entries: list[dict[str, Any]]
    columns: list[str]
    datasets: list[str] = field(default_factory=list)
    league: str | None = None
    total: int = 0
    pinned: list[dict[str, Any]] = field(default_factory=list)
    page: int = 1
    pages: int = 1
    statistics: bool = False


PER_PAGE = 100
"""Leaderboard rows per page: a 10,000-entry board took ~1 s to render whole."""


def leaderboards(session: Session, phase: Phase, sees_all: bool, *, page: int = 1,
                 per_page: int = PER_PAGE, user_id: int | None = None) -> list[Board]:
    """Page `page` (from 1) of the boards of a phase, one per league when the competition has
    leagues, hidden as `view_leaderboard` hides them for this viewer (the JSON API's rule);
    `user_id`'s own rows outside the page come in `pinned`."""
    comp = phase.competition
    chosen = (phase.leaderboard or {}).get("columns")
    leagues = comp.leagues or [{"name": None, "title": "Leaderboard"}]
    boards = []
    for league in leagues:
        view = view_leaderboard(session, phase, comp, league["name"], sees_all,
                                offset=(page - 1) * per_page, limit=per_page, user_id=user_id)
        hidden = "none" if sees_all else view["hidden"]
        boards.append(Board(
            title=league.get("title") or league["name"], hidden=hidden,
            description=league.get("description", ""), entries=view["entries"],
            columns=view["columns"] if chosen else [*view["columns"], "submitted_at"],
            datasets=view["datasets"], league=league["name"], total=view["total"],
            pinned=view["pinned"], page=page, pages=max(1, -(-view["total"] // per_page)),
            statistics=view["statistics"]))
    return boards


def page_numbers(page: int, pages: int, around: int = 2) -> list[int | None]:
    """The page links to show: first, last and `around` either side of `page`; None marks a gap."""
    keep = sorted({1, pages, *range(max(1, page - around), min(pages, page + around) + 1)})
    out: list[int | None] = []
    for number in keep:
        if out and number - out[-1] > 1:
            out.append(None)
        out.append(number)
    return out
