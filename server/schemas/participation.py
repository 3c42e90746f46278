"""Participation over the API: the caller's status in a competition, a request to take part,
the competition's mode and its requests (server/api/participation.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from server.models import Competition


class ParticipationOut(BaseModel):
    competition_id: int
    mode: Literal["open", "approval"]
    status: Literal["approved", "pending", "denied", "none"]
    terms: bool = False  # the competition has terms to accept before taking part

    @classmethod
    def of(cls, comp: Competition, status: str, terms: bool) -> ParticipationOut:
        """From the stored strings (mode, status), which the model checks."""
        return cls.model_validate({"competition_id": comp.id, "mode": comp.participation,
                                   "status": status, "terms": terms})


class ParticipationJoinIn(BaseModel):
    accept_terms: bool = False


class ModeIn(BaseModel):
    mode: Literal["open", "approval"]


class ParticipationMemberOut(BaseModel):
    user_id: int
    username: str
    status: Literal["approved", "pending", "denied"]
    requested_at: datetime
    decided_at: datetime | None = None
