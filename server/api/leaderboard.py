"""The leaderboard of a (non-draft) phase, per league, as JSON or CSV.

Participants and anonymous viewers see what the phase shows them (scores or the whole board
may be hidden during a phase); organizers of the competition always see everything.
`limit`/`offset` page through the board (default: all of it); ranks are the whole board's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from server.api.deps import OptionalUser, SessionDep
from server.core.errors import ForbiddenError, InvalidInputError, NotFoundError
from server.models import Competition, Submission
from server.schemas.submission import Comparison, Leaderboard
from server.services.leaderboard_stats import (
    board_submission_ids,
    describe_comparison,
    shows_statistics,
)
from server.services.leaderboard_view import (
    cached_leaderboard_json,
    leaderboard_csv,
    league_names,
    view_leaderboard,
)
from server.services.secrecy import board_hidden
from server.services.tenancy import organizes_phase, visible_phase

router = APIRouter(prefix="/api/v1", tags=["leaderboard"])


@router.get("/phases/{phase_id}/leaderboard", response_model=Leaderboard,
            responses={200: {"content": {"text/csv": {}}}})
def leaderboard(phase_id: int, session: SessionDep, user: OptionalUser,
                league: str | None = None,
                format: Literal["json", "csv"] = "json",  # noqa: A002
                limit: Annotated[int | None, Query(ge=1, description="entries at most "
                                                   "(default: the whole board)")] = None,
                offset: Annotated[int, Query(ge=0, description="entries to skip")] = 0,
                ) -> Leaderboard | Response:
    """One entry per participant (selected, else best or latest by the phase rule) and per
    baseline, ranked by score or average rank across datasets; ties to the earlier.
    `limit`/`offset` return a window of the board; `total` counts all its entries."""
    phase = visible_phase(session, phase_id, user)
    comp = session.get(Competition, phase.competition_id)
    if league is not None and league not in league_names(comp):
        raise InvalidInputError(f"league {league!r} is not one of {league_names(comp)}; "
                                "leave it out for the first league", code="leaderboard.league")
    sees_all = organizes_phase(session, user, phase)
    if format == "json":
        # Already in the schema's shape: validating every entry again cost a fifth of a request.
        return Response(cached_leaderboard_json(session, phase, comp, league, sees_all,
                                                offset=offset, limit=limit),
                        media_type="application/json")
    board = view_leaderboard(session, phase, comp, league, sees_all, offset=offset, limit=limit)
    name = f"leaderboard-phase{phase.id}{'-' + board['league'] if board['league'] else ''}"
    return Response(leaderboard_csv(board), media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})


@router.get("/submissions/{submission_id}/compare/{other_submission_id}",
            response_model=Comparison)
def compare(submission_id: int, other_submission_id: int, session: SessionDep,
            user: OptionalUser) -> Comparison:
    """Submission `a` against `b` (same phase) over their shared test tasks. Participants may
    compare their own submissions and those on the board, when the phase shows statistics."""
    a, b = submission_id, other_submission_id
    found = [session.get(Submission, sid) for sid in (a, b)]
    subs = [s for s in found if s is not None and s.state == "finished"]
    if len(subs) != 2:
        raise NotFoundError(f"submissions {a} and {b}: expected two finished submissions; "
                            "`arena status` lists yours", code="compare.not_found")
    if subs[0].phase_id != subs[1].phase_id:
        raise InvalidInputError(f"submission {a} is in phase {subs[0].phase_id}, {b} in phase "
                                f"{subs[1].phase_id}; compare two submissions of one phase",
                                code="compare.phases")
    phase = visible_phase(session, subs[0].phase_id, user)
    if not organizes_phase(session, user, phase):
        if not shows_statistics(phase) or board_hidden(phase) != "none":
            raise ForbiddenError(f"phase {phase.id} does not show statistics now; its organizers "
                                 "chose when (during, after close, or never)",
                                 code="compare.hidden")
        on_board = board_submission_ids(session, phase, None)
        for s in subs:
            if s.id not in on_board and (user is None or s.user_id != user.id):
                raise ForbiddenError(f"submission {s.id} is neither yours nor on the board; "
                                     "compare your own or board entries", code="compare.hidden")
    answer = describe_comparison(session, phase, a, b)
    if answer is None:
        raise NotFoundError(f"submissions {a} and {b} share no test task (per-task results are "
                            "needed)", code="compare.no_tasks")
    return Comparison(**answer)
