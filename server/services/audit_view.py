"""Audit entries read back for a page: why a submission was re-run (`submission.rerun`'s
`reason`), shown beside its replaced runs so the owner and other organizers see the why."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.models import AuditLog


def rerun_reasons(session: Session, submission_id: int) -> list[dict[str, Any]]:
    """Each re-run of the submission, oldest first: `{"at", "reason"}` (reason may be "")."""
    rows = session.execute(select(AuditLog.at, AuditLog.details).where(
        AuditLog.action == "submission.rerun",
        AuditLog.target == f"submission:{submission_id}").order_by(AuditLog.id)).all()
    return [{"at": at, "reason": (details or {}).get("reason", "")} for at, details in rows]
