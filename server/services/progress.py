"""A running run's progress as its worker reports it with each heartbeat: kept on the run (only
by the holder of its current fencing token, so a stale worker cannot overwrite it) for the
submission page and `arena submit`. Presentation data: never used to decide anything."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from server.models import Run


def record_progress(session: Session, run_id: int, fencing_token: int,
                    progress: dict[str, Any], now: datetime) -> None:
    """Store `progress` (schemas.internal.RunProgress) with the time it was reported."""
    session.execute(update(Run).where(Run.id == run_id, Run.fencing_token == fencing_token)
                    .values(progress={**progress, "at": now.isoformat()}))
