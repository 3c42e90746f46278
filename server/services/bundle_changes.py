"""What applying a bundle to an existing competition would change, field by field.

`arena competition update` prints this list and asks before it applies anything, and the API
answers it without writing (`POST /api/v1/competitions/{ref}/bundle/diff`, a dry run); the
update's audit entry keeps the same list. A field the bundle leaves out keeps the value the
schema gives it — except a phase's `status`, which a bundle changes only when it says
`status:` (closing and reopening are the phase's own actions), so that re-applying a bundle to
change one leaderboard setting cannot reopen a closed phase.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from server.bundles.parse import ParsedBundle
from server.bundles.schema import PhaseSpec
from server.models import Competition, Phase

COMPETITION_FIELDS = ("title", "description", "participation", "pages", "leagues")


@dataclass(frozen=True)
class Change:
    """One field that an update would change (`phase` None: the competition itself)."""

    phase: str | None
    field: str
    old: Any
    new: Any

    def describe(self) -> str:
        """`phase feedback: status: closed → open`, values shortened for a terminal."""
        where = f"phase {self.phase}" if self.phase else "competition"
        return f"{where}: {self.field}: {_short(self.old)} → {_short(self.new)}"


def intended_status(spec: PhaseSpec, existing: Phase | None) -> str:
    """The status a phase has after the bundle: the explicit field, else the current status,
    else (a new phase) `open`."""
    if spec.status is not None:
        return spec.status
    return existing.status if existing is not None else "open"


def compute_changes(comp: Competition, parsed: ParsedBundle,
                    values_of: Any) -> tuple[list[Change], list[str]]:
    """The field changes and the names of new phases if `parsed` were applied to `comp`.

    `values_of(spec, data, existing)` gives a phase's column values (services.bundles)."""
    changes: list[Change] = []
    spec = parsed.spec
    now_values = {"title": spec.title, "description": spec.description,
                  "participation": spec.participation,
                  "pages": [p.model_dump() for p in spec.pages],
                  "leagues": [lg.model_dump() for lg in spec.leagues]}
    for field in COMPETITION_FIELDS:
        old, new = getattr(comp, field), now_values[field]
        changes += _field_changes(None, field, old, new)
    existing = {p.name: p for p in comp.phases}
    by_id = {p.id: p.name for p in comp.phases}
    added = []
    for phase_spec in spec.phases:
        phase = existing.get(phase_spec.name)
        if phase is None:
            added.append(phase_spec.name)
            continue
        values = values_of(phase_spec, parsed.data[phase_spec.name], phase)
        for field, new in values.items():
            changes += _field_changes(phase.name, field, getattr(phase, field), new)
        old_carry = by_id.get(phase.carry_from_id) if phase.carry_from_id else None
        if old_carry != phase_spec.carry_from:
            changes.append(Change(phase.name, "carry_from", old_carry, phase_spec.carry_from))
    return changes, added


def changes_out(changes: list[Change], added: list[str]) -> dict[str, Any]:
    """The JSON form of a diff (the dry-run answer and the audit entry)."""
    return {"changes": [asdict(c) | {"text": c.describe()} for c in changes],
            "added_phases": added}


def _field_changes(phase: str | None, field: str, old: Any, new: Any) -> list[Change]:
    """The change of one field; a mapping (leaderboard, resources, protocol) key by key, so
    that the diff names `leaderboard.statistics` rather than printing both mappings."""
    old, new = _plain(old), _plain(new)
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [Change(phase, f"{field}.{key}", old.get(key), new.get(key))
                for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    return [Change(phase, field, old, new)]


def _plain(value: Any) -> Any:
    """A value as JSON would store it (dates as ISO text, tuples as lists)."""
    return json.loads(json.dumps(value, default=lambda v: v.isoformat()))


def _short(value: Any, width: int = 60) -> str:
    text = "—" if value is None else (value if isinstance(value, str)
                                      else json.dumps(value, sort_keys=True))
    return text if len(text) <= width else text[: width - 1] + "…"
