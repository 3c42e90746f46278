"""Where a phase stands in time: the status participants see, whether it takes uploads now, and
what comes next — shared by the JSON API (`GET /api/v1/phases`), the pages and the CLI.

The stored `status` is what the organizer set; the *effective* status also reads the dates, so
an `open` phase whose `ends_at` has passed is shown `closed` and one whose `starts_at` is still
ahead is `upcoming` (the upload check `check_phase_open` refuses both already). A final phase
(`carry_from_id`) never takes uploads: its entries are carried from the phase before it, so it
is `open` from the moment they are (its source closed), whatever its `starts_at` says — the
organizer's dashboard, the participants' pages, the API and the CLI all read this one function,
so nobody sees "upcoming" while carried runs execute and someone else sees "open".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import inspect

from server.models import Phase

EffectiveStatus = Literal["draft", "upcoming", "open", "closed"]


def effective_status(phase: Phase, now: datetime) -> EffectiveStatus:
    """`draft`, `upcoming`, `open` or `closed` at `now` (dates override a stored `open`; a
    final phase whose entries were carried is open)."""
    if phase.status == "draft":
        return "draft"
    if phase.status == "closed":
        return "closed"
    if phase.status != "open":  # the schemas admit only these three
        raise ValueError(f"phase {phase.id} has status {phase.status!r}; expected draft, open "
                         "or closed")
    if phase.ends_at is not None and now >= phase.ends_at:
        return "closed"
    if entries_carried(phase):
        return "open"
    if phase.starts_at is not None and now < phase.starts_at:
        return "upcoming"
    return "open"


def entries_carried(phase: Phase) -> bool:
    """True for a final phase whose source phase has closed (its entries were carried)."""
    if phase.carry_from_id is None or inspect(phase).session is None:
        return False
    source = next((p for p in phase.competition.phases if p.id == phase.carry_from_id), None)
    return source is not None and source.closed_at is not None


def accepts_uploads(phase: Phase, now: datetime) -> bool:
    """True when an upload to `phase` at `now` passes the phase check of the upload service."""
    return effective_status(phase, now) == "open" and phase.carry_from_id is None


def format_duration(seconds: float) -> str:
    """`3 days 4 h`, `5 h 12 min`, `12 min`, `under a minute`: two units at most."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days} day{'s' if days != 1 else ''}" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    return f"{minutes} min" if minutes else "under a minute"


def format_limit(seconds: int) -> str:
    """A time limit as the bundle set it: `90 s` (not rounded to `1 min`), `5 min`, `5 h`."""
    if seconds % 60 or seconds < 60:
        return f"{seconds} s"
    return format_duration(seconds)


def closed_since(phase: Phase, now: datetime) -> datetime | None:
    """When a closed phase stopped taking submissions: the earlier of its close and its
    (passed) end date; None when neither is known."""
    ends = phase.ends_at if phase.ends_at is not None and phase.ends_at <= now else None
    dates = [d for d in (phase.closed_at if phase.status == "closed" else None, ends) if d]
    return min(dates) if dates else None


@dataclass(frozen=True)
class Step:
    """One phase on a competition's timeline, as a page shows it."""

    phase: Phase
    status: str
    accepting: bool
    current: bool
    countdown: str  # "closes in 3 days 4 h", "opens in 2 h", "" when no date is ahead
    deadline: datetime | None  # the date the countdown counts to (for a live countdown)
    kind: str  # "feedback" (takes uploads) or "final" (carries entries from another phase)
    closed_since: datetime | None = None  # when a closed phase stopped taking submissions


def phase_step(phase: Phase, now: datetime) -> Step:
    """The timeline entry of one phase at `now`."""
    status = effective_status(phase, now)
    countdown, deadline = "", None
    if status == "upcoming" and phase.starts_at is not None:
        deadline = phase.starts_at
        countdown = f"opens in {format_duration((deadline - now).total_seconds())}"
    elif status == "open" and phase.ends_at is not None:
        deadline = phase.ends_at
        countdown = f"closes in {format_duration((deadline - now).total_seconds())}"
    return Step(phase=phase, status=status, accepting=accepts_uploads(phase, now),
                current=status == "open", countdown=countdown, deadline=deadline,
                kind="final" if phase.carry_from_id is not None else "feedback",
                closed_since=closed_since(phase, now) if status == "closed" else None)


def competition_timeline(phases: list[Phase], now: datetime) -> list[Step]:
    """The phases in the order they happen (start date, then id), each with its step."""
    far = datetime.max.replace(tzinfo=now.tzinfo)
    ordered = sorted(phases, key=lambda p: (p.starts_at or p.ends_at or far, p.id))
    return [phase_step(p, now) for p in ordered]


def next_step(phase: Phase, timeline: list[Step]) -> Step | None:
    """What follows `phase`: the final phase carrying from it, else the next on the timeline."""
    for step in timeline:
        if step.phase.carry_from_id == phase.id:
            return step
    ids = [s.phase.id for s in timeline]
    if phase.id in ids and ids.index(phase.id) + 1 < len(ids):
        return timeline[ids.index(phase.id) + 1]
    return None
