"""Leaderboard: one entry per participant, by the phase's rule.

A submission's score is the worst of its runs (cached on the submission when its last run
ends); only finished submissions rank. Rule `best` keeps each participant's highest-scoring
submission, `latest` their most recent finished one. Higher is better; ties go to the earlier
submission (then the lower id), so re-submitting an equal score never overtakes anyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.models import Phase, Submission, User


@dataclass(frozen=True)
class Entry:
    rank: int
    username: str
    submission_id: int
    score: float
    created_at: datetime


def compute_leaderboard(session: Session, phase: Phase) -> list[Entry]:
    rows = session.execute(
        select(Submission.id, Submission.user_id, Submission.score, Submission.created_at,
               User.username)
        .join(User, User.id == Submission.user_id)
        .where(Submission.phase_id == phase.id, Submission.state == "finished",
               Submission.score.is_not(None))
    ).all()
    chosen: dict[int, tuple] = {}
    for row in rows:
        current = chosen.get(row.user_id)
        if current is None or _prefer(row, current, phase.leaderboard_rule):
            chosen[row.user_id] = row
    ordered = sorted(chosen.values(), key=lambda r: (-r.score, r.created_at, r.id))
    return [Entry(rank=i + 1, username=r.username, submission_id=r.id, score=r.score,
                  created_at=r.created_at) for i, r in enumerate(ordered)]


def _prefer(candidate, current, rule: str) -> bool:
    """True when `candidate` should replace `current` as the participant's entry."""
    if rule == "latest":
        return (candidate.created_at, candidate.id) > (current.created_at, current.id)
    return (-candidate.score, candidate.created_at, candidate.id) < (
        -current.score, current.created_at, current.id)
