"""Fact sheets over the API: a phase's questions with the caller's answers
(server/api/factsheets.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class FactsheetIn(BaseModel):
    answers: dict[str, Any]


class FactsheetOut(BaseModel):
    phase_id: int
    questions: list[dict[str, Any]]
    answers: dict[str, Any]
