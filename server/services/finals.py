"""Closing a phase, and carrying its chosen submissions into the final phase that follows it.

When a phase closes (an organizer's `POST /phases/{id}/close`, or the reconciler noticing that
`ends_at` passed), each phase that names it in `carry_from_id` receives, per competitor (the
team in a team competition, the participant otherwise) and league, the submission that
represents them (selected, else by the closed phase's rule) if its score is above the league's
`final_threshold` (no threshold: every finished entry), plus every baseline. A carried
submission is a new Submission in the final phase that points at the same stored zip, keeps its
team, method and league (the final's board names the team and method), is not charged to any
quota, and gets the final phase's runs (one per seed, `runs_per_submission` of them) enqueued
so that workers run them in parallel; its score is the worst run. `closed_at` and a unique
(phase, carried_from) pair make closing idempotent: a second close, or a reconciler racing an
organizer, carries nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from server.core.db import count_changed
from server.core.errors import ConflictError
from server.core.security import hash_token, new_token
from server.models import AuditLog, Competition, Phase, Run, Submission, User
from server.services.close_summary import compute_close_summary
from server.services.competitions import check_phase_data
from server.services.leaderboard import choose_entries
from submission_api.contract.states import RunState

Job = tuple[int, str, str]


@dataclass(frozen=True)
class CloseReport:
    phase_id: int
    carried: dict[int, list[int]]  # final phase id -> new submission ids
    skipped: dict[int, list[int]]  # final phase id -> origin ids below the league threshold
    summary: list[dict[str, Any]] = field(default_factory=list)  # services.close_summary


def _thresholds(comp: Competition) -> dict[str | None, float | None]:
    return {lg["name"]: lg.get("final_threshold") for lg in (comp.leagues or [])}


def _chosen(session: Session, phase: Phase) -> list[Any]:
    rows = session.execute(
        select(Submission.id, Submission.user_id, Submission.team_id, Submission.score,
               Submission.created_at, Submission.league, Submission.is_baseline,
               Submission.is_selected)
        .where(Submission.phase_id == phase.id, Submission.state == "finished",
               Submission.score.is_not(None), Submission.disqualified_at.is_(None))).all()
    by_league: dict[str | None, list[Any]] = {}
    for row in rows:
        by_league.setdefault(row.league, []).append(row)
    chosen = []
    for league_rows in by_league.values():
        chosen += choose_entries([_Row(r) for r in league_rows], phase.leaderboard_rule)
    return sorted(chosen, key=lambda r: r.id)


class _Row:
    """A result row with the `origin_at` attribute that choose_entries' tie key reads."""

    def __init__(self, row: Any) -> None:
        self.__dict__.update(row._asdict(), origin_at=None)


def carry_into(session: Session, source: Phase, final: Phase, now: datetime,
               default_queue: str) -> tuple[list[int], list[int], list[Job]]:
    """Carry the chosen submissions of `source` into `final`; returns new ids, skipped ids
    and jobs."""
    thresholds = _thresholds(session.get_one(Competition, source.competition_id))
    present = session.execute(select(Submission.carried_from_id, Submission.user_id,
                                     Submission.team_id, Submission.league,
                                     Submission.is_baseline).where(
        Submission.phase_id == final.id, Submission.carried_from_id.is_not(None))).all()
    already = {r.carried_from_id for r in present}
    # A phase reopened and closed again carries only who was not carried the first time.
    entered = {(competitor(r), r.league) for r in present if not r.is_baseline}
    carried, skipped, jobs = [], [], []
    for row in _chosen(session, source):
        threshold = thresholds.get(row.league)
        if not row.is_baseline and threshold is not None and not row.score > threshold:
            skipped.append(row.id)
            continue
        if row.id in already or (not row.is_baseline
                                 and (competitor(row), row.league) in entered):
            continue
        new, new_jobs = _copy(session, session.get_one(Submission, row.id), final, now,
                              final.queue or default_queue)
        carried.append(new.id)
        jobs += new_jobs
    return carried, skipped, jobs


def competitor(row: Any) -> tuple[str, int]:
    """Who a submission row stands for: its team when it has one, else its owner."""
    return ("team", row.team_id) if row.team_id is not None else ("user", row.user_id)


def _copy(session: Session, origin: Submission, final: Phase, now: datetime,
          queue_name: str) -> tuple[Submission, list[Job]]:
    copy = Submission(
        phase_id=final.id, user_id=origin.user_id, team_id=origin.team_id,
        method_name=origin.method_name, method_description=origin.method_description,
        code_url=origin.code_url, sha256=origin.sha256,
        size_bytes=origin.size_bytes, storage_path=origin.storage_path,
        zip_root=origin.zip_root, note=f"carried from submission {origin.id}",
        state="queued", created_at=now, league=origin.league, is_baseline=origin.is_baseline,
        charged=False, carried_from_id=origin.id)
    tokens = [new_token() for _ in range(max(final.runs_per_submission, 1))]
    copy.runs = [Run(index=i, seed=i, state=RunState.QUEUED, run_token_hash=hash_token(tok),
                     enqueued_at=now, created_at=now) for i, tok in enumerate(tokens)]
    session.add(copy)
    session.flush()
    return copy, [(run.id, tok, queue_name) for run, tok in zip(copy.runs, tokens, strict=True)]


def close_phase(session: Session, phase: Phase, actor: User | None, now: datetime,
                default_queue: str) -> tuple[CloseReport, list[Job]]:
    """Close `phase` and carry its entries into the phases that carry from it.

    A phase reopened after a close (closed_at kept, status open) can be closed again.
    Raises ConflictError when the phase is closed (nothing is carried twice), and
    InvalidInputError (closing nothing) when a final it carries into names data its organizer
    may not use: the carried runs would compute results on someone else's test set."""
    for final in session.execute(select(Phase).where(Phase.carry_from_id == phase.id)
                                 .order_by(Phase.id)).scalars():
        check_phase_data(session, final, actor)
    closed = count_changed(session,
        update(Phase).where(Phase.id == phase.id,
                            or_(Phase.closed_at.is_(None), Phase.status != "closed"))
        .values(closed_at=now, status="closed").execution_options(synchronize_session=False))
    if not closed:
        raise ConflictError(f"phase {phase.id} was already closed at "
                            f"{phase.closed_at.isoformat() if phase.closed_at else '?'}; its "
                            "submissions were carried then", code="phase.already_closed")
    session.refresh(phase)
    finals = session.execute(select(Phase).where(Phase.carry_from_id == phase.id)
                             .order_by(Phase.id)).scalars().all()
    carried, skipped, jobs = {}, {}, []
    for final in finals:
        carried[final.id], skipped[final.id], new_jobs = carry_into(session, phase, final, now,
                                                                   default_queue)
        jobs += new_jobs
    session.flush()
    summary = compute_close_summary(session, phase, list(finals), skipped) if finals else []
    session.add(AuditLog(actor_id=actor.id if actor else None, action="phase.close",
                         target=f"phase:{phase.id}", at=now,
                         details={"automatic": actor is None, "carried": carried,
                                  "below_threshold": skipped, "summary": summary}))
    session.flush()
    return CloseReport(phase_id=phase.id, carried=carried, skipped=skipped,
                       summary=summary), jobs


def due_phases(session: Session, now: datetime) -> list[Phase]:
    """Open phases whose end has passed and which were never closed."""
    return list(session.execute(select(Phase).where(
        Phase.closed_at.is_(None), Phase.status == "open", Phase.ends_at.is_not(None),
        Phase.ends_at <= now).order_by(Phase.id)).scalars())
