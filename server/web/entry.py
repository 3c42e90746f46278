"""Where the viewer stands in a competition, for its pages: whether they may submit (pages show
Submit and the quota only then), the Join / Request-access box with the terms to accept, the
"pending approval" banner, and their standing on each phase's board. The rules are the
participation service's (`status_of`, `may_submit`); this module only gathers what to show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.models import Competition, Phase, Submission, User
from server.services.leaderboard_view import view_leaderboard
from server.services.participation import may_submit, status_of

TABS = ("overview", "data", "evaluation", "terms")


@dataclass(frozen=True)
class Entry:
    """The viewer's place in a competition: status is `approved`, `pending`, `denied`,
    `none` (not joined) or `anonymous`."""

    status: str
    may_submit: bool
    mode: str
    terms: bool

    @property
    def can_join(self) -> bool:
        return self.status == "none"

    @property
    def join_label(self) -> str:
        return "Request access" if self.mode == "approval" else "Join"


def entry_of(session: Session, comp: Competition, user: User | None) -> Entry:
    status = "anonymous" if user is None else status_of(session, comp, user)
    return Entry(status=status, may_submit=may_submit(session, comp, user),
                 mode=comp.participation, terms=bool(comp.terms))


def standing(session: Session, comp: Competition, user: User | None,
             phases: list[Phase]) -> list[dict[str, Any]]:
    """Per phase the viewer submitted to: how many submissions, and the rank of the entry that
    stands for them on the board (as the board shows it to them: hidden boards show none)."""
    if user is None:
        return []
    counts = dict(session.execute(
        select(Submission.phase_id, func.count(Submission.id))
        .where(Submission.user_id == user.id, Submission.phase_id.in_([p.id for p in phases]))
        .group_by(Submission.phase_id)).all())
    out = []
    for phase in phases:
        if not counts.get(phase.id):
            continue
        board = view_leaderboard(session, phase, comp, None, False, offset=0, limit=0,
                                 user_id=user.id)
        row = board["pinned"][0] if board["pinned"] else None
        out.append({"phase": phase, "submissions": counts[phase.id], "total": board["total"],
                    "rank": row.get("rank") if row else None,
                    "score": row.get("score") if row else None})
    return out


def tab_of(requested: str | None, comp: Competition) -> str:
    """The tab to show: the one asked for, if the competition has it, else Overview."""
    tabs = comp.tabs or {}
    present = {"overview": True, "data": bool(tabs.get("data")),
               "evaluation": bool(tabs.get("evaluation")), "terms": bool(comp.terms)}
    return requested if requested in TABS and present[requested] else "overview"
