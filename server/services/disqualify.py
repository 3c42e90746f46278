"""Disqualifying a submission: an organizer's decision, audited, reversible. A disqualified
submission leaves the leaderboard (`leaderboard._candidates`) and is never carried into a final
(`finals._chosen`); its owner sees the reason on its page. Its runs and scores are kept."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from server.models import Submission, User
from server.services.operations import audit

DEFAULT_REASON = "disqualified by the organizers"
REASON_MAX = 500


def set_disqualified(session: Session, submission: Submission, actor: User, disqualify: bool,
                     reason: str, now: datetime) -> Submission:
    """Disqualify (with `reason`, shown to the owner) or reinstate `submission`; audited."""
    if disqualify:
        submission.disqualified_at = now
        submission.disqualified_reason = (reason.strip() or DEFAULT_REASON)[:REASON_MAX]
        submission.is_selected = False  # it represents nobody: the next entry by rule does
    else:
        submission.disqualified_at, submission.disqualified_reason = None, None
    audit(session, actor, "submission.disqualify" if disqualify else "submission.reinstate",
          f"submission:{submission.id}", now, reason=submission.disqualified_reason)
    session.flush()
    return submission
