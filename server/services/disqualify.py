"""Disqualifying a submission: an organizer's decision, with a reason (required: its owner reads
it), audited, reversible. A disqualified submission leaves every leaderboard
(`leaderboard._candidates`) and is never carried into a final (`finals._chosen`); its owner sees
the reason on its page. Its finished runs and scores are kept.

A disqualification is of the code, not of one phase's copy of it (issue 32.3: a disqualified
submission's carried copy won the final). So it follows the whole carry family: the origin and
every copy carried from it, at any depth (a copy of a copy, copies in two finals). Disqualifying
any one of them — the feedback entry after the close, or the final's copy — disqualifies all
of them, with the same reason; their waiting runs are cancelled at once and their running runs
stop at their worker's next heartbeat (a disqualified entry is evaluated no further).
Reinstating any one reinstates the family; runs cancelled meanwhile stay cancelled, so a
reinstated copy is re-run by the organizer (its page's Re-run) to get a score again.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, InvalidInputError
from server.models import Submission, User
from server.services.operations import audit, cancel_submission

REASON_MAX = 500
MAX_DEPTH = 32  # carry chains are a phase or two long; a bound, not a rule


def carry_family(session: Session, submission: Submission) -> list[Submission]:
    """`submission`'s origin (followed up the carry chain) and every copy carried from it,
    in id order."""
    root, seen = submission, {submission.id}
    for _ in range(MAX_DEPTH):
        if root.carried_from_id is None or root.carried_from_id in seen:
            break
        parent = session.get(Submission, root.carried_from_id)
        if parent is None:
            break
        root = parent
        seen.add(root.id)
    family, frontier = {root.id: root}, [root.id]
    for _ in range(MAX_DEPTH):
        if not frontier:
            break
        copies = session.execute(select(Submission).where(
            Submission.carried_from_id.in_(frontier))).scalars().all()
        frontier = [c.id for c in copies if c.id not in family]
        family |= {c.id: c for c in copies}
    return [family[k] for k in sorted(family)]


def set_disqualified(session: Session, submission: Submission, actor: User, disqualify: bool,
                     reason: str, now: datetime) -> Submission:
    """Disqualify (with `reason`, shown to the owner; required) or reinstate `submission` and
    its whole carry family; audited once, naming every submission it changed.

    Raises InvalidInputError (`disqualify.reason_required`) for a disqualification without a
    reason."""
    reason = " ".join(reason.split())[:REASON_MAX]
    if disqualify and not reason:
        raise InvalidInputError("say why the submission is disqualified: the reason is shown "
                                "to its owner (e.g. 'used the test labels')",
                                code="disqualify.reason_required")
    family = carry_family(session, submission)
    stopped = []
    for member in family:
        if disqualify:
            member.disqualified_at, member.disqualified_reason = now, reason
            member.is_selected = False  # it represents nobody: the next entry by rule does
            session.flush()
            try:
                cancel_submission(session, member, actor, now)
                stopped.append(member.id)
            except ConflictError:  # nothing of it was waiting or running
                pass
        else:
            member.disqualified_at, member.disqualified_reason = None, None
    audit(session, actor, "submission.disqualify" if disqualify else "submission.reinstate",
          f"submission:{submission.id}", now, reason=reason if disqualify else None,
          family=[m.id for m in family], runs_stopped_of=stopped)
    session.flush()
    return submission
