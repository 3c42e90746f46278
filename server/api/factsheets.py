"""Fact sheets over the API (issue 23): a phase's questions with the caller's answers, saving
them, and (organizers of the competition) the export in JSON or CSV with who is missing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from server.api.deps import CurrentUser, NowDep, Organizer, SessionDep, WriteSessionDep
from server.schemas.factsheet import FactsheetIn, FactsheetOut
from server.services import factsheets as service
from server.services.competitions import get_owned_competition
from server.services.tenancy import visible_phase

router = APIRouter(prefix="/api/v1", tags=["factsheets"])




@router.get("/phases/{phase_id}/factsheet", response_model=FactsheetOut)
def my_factsheet(phase_id: int, user: CurrentUser, session: SessionDep) -> FactsheetOut:
    """The phase's questions and your answers so far."""
    phase = visible_phase(session, phase_id, user)
    return FactsheetOut(phase_id=phase.id, questions=service.questions(phase),
                        answers=service.my_answers(session, phase, user))


@router.put("/phases/{phase_id}/factsheet", response_model=FactsheetOut)
def answer_factsheet(phase_id: int, body: FactsheetIn, user: CurrentUser,
                     session: WriteSessionDep, now: NowDep) -> FactsheetOut:
    """Save your answers (all of them: they replace the previous ones)."""
    phase = visible_phase(session, phase_id, user)
    saved = service.save_answers(session, phase, user, body.answers, now)
    return FactsheetOut(phase_id=phase.id, questions=service.questions(phase), answers=saved)


@router.get("/phases/{phase_id}/factsheet/answers", responses={
    200: {"content": {"text/csv": {}}}})
def export_answers(phase_id: int, user: Organizer, session: SessionDep,
                   format: str = "json") -> Any:
    """Every answer and who has not answered (organizers of the competition); ?format=csv."""
    phase = visible_phase(session, phase_id, user)
    get_owned_competition(session, phase.competition_id, user)
    data = service.export(session, phase)
    if format == "csv":
        return Response(service.export_csv(data), media_type="text/csv", headers={
            "Content-Disposition": f'attachment; filename="factsheet-phase-{phase.id}.csv"'})
    return data
