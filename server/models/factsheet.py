"""Fact-sheet answers (issue 23): one row per (phase, account), the answers to the phase's
questions (`Phase.factsheet`) as a JSON object keyed by question key, and when they were last
saved. Organizers export them beside the results and see who has not answered."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from server.models.base import Base, UTCDateTime, utcnow


class FactsheetAnswer(Base):
    __tablename__ = "factsheet_answers"
    __table_args__ = (UniqueConstraint("phase_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phases.id", ondelete="CASCADE"),
                                          index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    answers: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
