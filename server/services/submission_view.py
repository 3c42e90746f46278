"""A submission as one viewer may read it: the JSON API and the submission page serve the same
redacted object (services/secrecy.py decides what is withheld; this module only applies it)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from server.core.config import Settings
from server.models import Phase, Submission, User
from server.schemas.submission import RunOut, SubmissionOut
from server.services.secrecy import FULL, redact_message, redact_run, view_for
from server.services.submissions import queue_position


def submission_out(session: Session, submission: Submission, settings: Settings,
                   user: User | None) -> SubmissionOut:
    """The submission as `user` may read it (services/secrecy.py: the owner's view unless they
    organize its competition)."""
    out = SubmissionOut.model_validate(submission)
    out.queue_position = queue_position(session, submission, settings.default_queue)
    view = view_for(session, session.get_one(Phase, submission.phase_id), user)
    if view is FULL:
        return out
    if not view.meta_test_text:
        # the message is one of its runs' (services/submissions.py derive_state): that run's stage
        stage = next((r.failure_stage for r in out.runs if (r.reason, r.message)
                      == (submission.reason, submission.message)), None)
        out.message = redact_message(submission.reason, submission.message, stage)
    if not view.scores:
        out.score = None
    out.runs = [RunOut(**redact_run(r.model_dump(), view)) for r in out.runs]
    return out
