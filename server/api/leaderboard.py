"""The public leaderboard of a (non-draft) phase."""

from __future__ import annotations

from fastapi import APIRouter

from server.api.competitions import visible_phase
from server.api.deps import OptionalUser, SessionDep
from server.schemas.submission import Leaderboard, LeaderboardEntry
from server.services.leaderboard import compute_leaderboard

router = APIRouter(prefix="/api/v1", tags=["leaderboard"])


@router.get("/phases/{phase_id}/leaderboard", response_model=Leaderboard)
def leaderboard(phase_id: int, session: SessionDep, user: OptionalUser) -> Leaderboard:
    """One entry per participant (best or latest, by the phase rule); ties to the earlier."""
    phase = visible_phase(session, phase_id, user)
    entries = [LeaderboardEntry(**e.__dict__) for e in compute_leaderboard(session, phase)]
    return Leaderboard(phase_id=phase.id, rule=phase.leaderboard_rule, entries=entries)
