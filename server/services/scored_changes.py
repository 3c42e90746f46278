"""A bundle update that changes what a scored phase measures (issue 36.2).

A phase's scores are comparable only if every entry was measured the same way: on the same
datasets (by content hash: a re-registered dataset with new content is new data), with the
same test seed, task count and protocol. An update that changes any of these (`MEASURING`) on
a phase that already has scored entries would leave the board ranking old scores beside new
ones, and queued runs would run on the new settings. So it is refused, with the entries named,
unless the organizer chooses what happens to the scores (`ON_SCORED`):
  - "rerun": apply the change and re-run every entry of the phase on the new settings (their
    current runs are superseded, as an organizer's re-run does; the history stays);
  - "new_phase": keep the scored phase as it was, closed, with its board, renamed
    `<name> (v<k>)`; the bundle's settings open as a new phase under the bundle's name.
The diff (`describe_scored`) says the same before anything is applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.bundles.parse import ParsedBundle
from server.core.errors import ConflictError, InvalidInputError
from server.models import TERMINAL_STATES, Phase, Run, Submission, User
from submission_api.protocols import ProtocolParams, ProtocolParamsError

MEASURING = ("protocol", "seed", "data")
"""Phase columns that decide what a score measures (datasets and their hashes, test seed,
protocol with its task count)."""
ON_SCORED = ("rerun", "new_phase")
_ARCHIVED = re.compile(r"^(?P<name>.+) \(v(?P<version>\d+)\)$")
_NAMED = 5
"""Entries named in a message; the rest are counted."""


@dataclass(frozen=True)
class ScoredChange:
    """A phase with scored entries whose measuring fields the update changes."""

    phase: Phase
    fields: list[str]
    entries: list[tuple[int, str]]  # (submission id, username)

    def text(self) -> str:
        named = ", ".join(f"#{sid} {user}" for sid, user in self.entries[:_NAMED])
        more = len(self.entries) - _NAMED
        return (f"phase {self.phase.name!r} has {len(self.entries)} scored entr"
                f"{'y' if len(self.entries) == 1 else 'ies'} ({named}"
                f"{f' and {more} more' if more > 0 else ''}) and this update changes what it "
                f"measures ({', '.join(self.fields)})")


def archived_base(name: str) -> str | None:
    """The bundle name a phase archived by `new_phase` came from, else None."""
    found = _ARCHIVED.match(name)
    return found.group("name") if found else None


def find_scored_changes(session: Session, phases: list[Phase], parsed: ParsedBundle,
                        values_of: Any) -> list[ScoredChange]:
    """Every phase of `phases` that `parsed` names, has scored entries, and would measure
    differently after the update."""
    existing = {p.name: p for p in phases}
    out = []
    for spec in parsed.spec.phases:
        phase = existing.get(spec.name)
        if phase is None:
            continue
        new = values_of(spec, parsed.data[spec.name], phase)
        fields = _changed_fields(phase, new)
        if not fields:
            continue
        entries = session.execute(
            select(Submission.id, User.username).join(User, User.id == Submission.user_id)
            .where(Submission.phase_id == phase.id, Submission.id.in_(
                select(Run.submission_id).where(Run.state == "finished",
                                                Run.superseded_at.is_(None))))
            .order_by(Submission.id)).all()
        if entries:
            out.append(ScoredChange(phase, fields, [(int(i), str(u)) for i, u in entries]))
    return out


def scored_submissions(session: Session, phase_id: int) -> list[Submission]:
    """The phase's submissions with a finished current run and no current run still busy
    (a busy one cannot be re-run yet; its queued runs run on the new settings)."""
    current = session.execute(select(Run.submission_id, Run.state).join(
        Submission, Submission.id == Run.submission_id).where(
        Submission.phase_id == phase_id, Run.superseded_at.is_(None))).all()
    states: dict[int, set[str]] = {}
    for sid, state in current:
        states.setdefault(int(sid), set()).add(str(state))
    ids = [sid for sid, seen in states.items()
           if "finished" in seen and seen <= set(TERMINAL_STATES)]
    return [session.get_one(Submission, sid) for sid in sorted(ids)]


def check_choice(scored: list[ScoredChange], on_scored: str | None) -> None:
    """Refuse (409 `bundle.scored_phase_changed`) when scores would change meaning unchosen."""
    if on_scored is not None and on_scored not in ON_SCORED:
        raise InvalidInputError(f"on_scored={on_scored!r}, expected one of {ON_SCORED} (or "
                                "none, to refuse changing what a scored phase measures)",
                                code="bundle.on_scored_invalid")
    if scored and on_scored is None:
        raise ConflictError(
            "; ".join(c.text() for c in scored) + ". Its scores would stay on the board beside "
            "scores measured the new way. Choose knowingly: re-run every entry on the new "
            "settings (`arena competition update --rerun`, API on_scored=rerun: their current "
            "scores are superseded), or start a new phase (`--new-phase`, on_scored=new_phase: "
            "this phase is kept, closed, with its board, as '<name> (v<k>)', and the bundle's "
            "settings open as a new phase), or leave these fields as they are.",
            code="bundle.scored_phase_changed")


def describe_scored(scored: list[ScoredChange]) -> list[dict[str, Any]]:
    """The diff's account of the scores: per phase, what each choice does to them."""
    return [{"phase": c.phase.name, "fields": c.fields, "entries": len(c.entries),
             "submission_ids": [sid for sid, _ in c.entries],
             "text": (f"{c.text()}: refused unless you choose --rerun (every entry re-run, "
                      f"current scores superseded) or --new-phase (this board kept closed as "
                      f"'{c.phase.name} (v{_next_version(c.phase)})', a new phase opens)")}
            for c in scored]


def archive_phases(session: Session, scored: list[ScoredChange], now: datetime) -> None:
    """`new_phase`: rename each scored phase `<name> (v<k>)` and close it, so that the bundle's
    phase of that name is created afresh (`bundles._apply_phases`)."""
    for change in scored:
        phase = change.phase
        phase.name = f"{phase.name} (v{_next_version(phase)})"
        phase.status = "closed"
        phase.closed_at = phase.closed_at or now
    session.flush()


def _next_version(phase: Phase) -> int:
    taken = [int(m.group("version")) for p in phase.competition.phases
             if (m := _ARCHIVED.match(p.name)) and m.group("name") == phase.name]
    return max(taken, default=0) + 1


def _changed_fields(phase: Phase, new: dict[str, Any]) -> list[str]:
    changed = []
    if _protocol(phase.protocol) != _protocol(new["protocol"]):
        old, now = _protocol(phase.protocol), _protocol(new["protocol"])
        changed += [f"protocol.{k}" for k in sorted(set(old) | set(now))
                    if old.get(k) != now.get(k)]
    if phase.seed != new["seed"]:
        changed.append("seed")
    old_data, new_data = phase.data or {}, new["data"] or {}
    for role in sorted(set(old_data) | set(new_data)):
        if _refs(old_data.get(role)) != _refs(new_data.get(role)):
            changed.append(f"data.{role}")
    return changed


def _protocol(value: Any) -> dict[str, Any]:
    """A protocol with its defaults filled, so that a field added to ProtocolParams since the
    phase was stored is not a change."""
    try:
        return ProtocolParams.from_dict(dict(value or {"name": "cross-domain"})).to_dict()
    except (ProtocolParamsError, TypeError, ValueError):
        return dict(value or {})


def _refs(value: Any) -> Any:
    """A data role as compared: its datasets by name and content hash, order kept."""
    if isinstance(value, list):
        return [(r.get("name"), r.get("content_hash")) if isinstance(r, dict) else r
                for r in value]
    return value
