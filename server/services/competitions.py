"""Creating and updating competitions and phases, with the checks organizers need.

Organizers edit only competitions they organize (services/tenancy.py; admins any). A phase
may never name a registered dataset its organizer may not use, whatever its status
(services/datasets.py: knowing another organizer's hash is not enough), and may only be opened
once every dataset it names is registered and usable, so a worker never claims a run whose data
cannot be fetched. Every other path that starts runs (carrying into a final at close, re-runs)
checks the data again with `check_phase_data` — a hash named while unregistered may since have
been registered by someone else. A final phase carries submissions only from a phase of its own
competition: carrying from another's would hand their participants' zips to this organizer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, InvalidInputError
from server.domain.phase import (
    COLUMNS,
    InvalidProtocolError,
    PhaseRules,
    PhaseRulesError,
    merge_columns,
)
from server.models import AuditLog, Competition, Dataset, Phase, User
from server.schemas.competition import CompetitionCreate, PhaseCreate, PhaseData
from server.services.datasets import usable_hashes
from server.services.tenancy import check_organizes, is_admin
from server.services.workers import check_image_known


def _check_phase(session: Session, phase: Phase, actor: User) -> None:
    if phase.starts_at and phase.ends_at and phase.ends_at <= phase.starts_at:
        raise InvalidInputError(f"phase {phase.name!r} ends ({phase.ends_at}) before it starts "
                                f"({phase.starts_at}); fix the dates")
    with session.no_autoflush:  # the pending change must not be written before it is checked
        source = None if phase.carry_from_id is None else session.get(Phase, phase.carry_from_id)
    if phase.carry_from_id is not None and source is None:
        raise InvalidInputError(f"phase {phase.name!r} carries from phase {phase.carry_from_id}, "
                                "which does not exist; name an existing phase id or null",
                                code="phase.unknown_carry_from")
    if source is not None and source.competition_id != phase.competition_id:
        raise InvalidInputError(f"phase {phase.name!r} carries from phase {source.id} of "
                                "another competition; a final phase carries from a phase of "
                                "its own competition", code="phase.foreign_carry_from")
    check_image_known(session, phase.image, f"phase {phase.name!r}", phase.competition_id)
    wanted = PhaseData.model_validate(phase.data or {}).hashes()
    with session.no_autoflush:
        usable = usable_hashes(session, actor, wanted)
        registered = set(session.execute(select(Dataset.content_hash).where(
            Dataset.content_hash.in_(list(wanted)))).scalars())
    foreign = [h for h in wanted if h in registered and h not in usable]
    missing = [h for h in wanted if h not in usable]
    if foreign:
        raise InvalidInputError(
            f"phase {phase.name!r} names datasets {foreign} registered by another organizer, "
            "in a phase of any status; name datasets you registered (POST /api/v1/datasets — "
            "uploading the same content yourself makes it usable)", code="phase.unknown_dataset")
    if phase.status == "open" and missing:
        raise InvalidInputError(
            f"phase {phase.name!r} names datasets {missing} that are not registered; register "
            "them (POST /api/v1/datasets, which verifies the content) before opening the phase",
            code="phase.unknown_dataset")


def check_phase_data(session: Session, phase: Phase, actor: User | None = None) -> None:
    """Raise InvalidInputError unless every dataset `phase` names is registered and usable by
    the organizer of its competition (or by `actor` when an admin acts): called on every path
    that starts runs in the phase, whatever its status."""
    wanted = PhaseData.model_validate(phase.data or {}).hashes()
    if not wanted:
        return
    comp = session.get(Competition, phase.competition_id)
    owner = session.get(User, comp.owner_id) if comp and comp.owner_id else None
    user = actor if is_admin(actor) or owner is None else owner
    usable = usable_hashes(session, user, wanted) if user is not None else set()
    missing = [h for h in wanted if h not in usable]
    if missing:
        raise InvalidInputError(
            f"phase {phase.id} ({phase.name!r}) names datasets {missing} that are not registered "
            "or not usable by its organizer, so no run can start there; register that content "
            "(POST /api/v1/datasets) or change the phase's data", code="phase.unknown_dataset")


def _rules_columns(phase: Phase | None, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with the columns of the phase's rules validated as one `PhaseRules` (with what
    `phase`, when given, keeps): protocol normalized, every bound the bundle's too."""
    if phase is not None and not COLUMNS & set(fields):
        return fields
    try:
        columns = merge_columns(phase, fields) if phase is not None else (
            PhaseRules.from_columns(fields).to_columns())
    except PhaseRulesError as error:
        code = ("phase.invalid_protocol" if isinstance(error, InvalidProtocolError)
                else "phase.out_of_bounds")
        raise InvalidInputError(str(error), code=code) from error
    return fields | columns


def get_owned_competition(session: Session, competition_id: int, user: User) -> Competition:
    """The competition if `user` organizes it (services/tenancy.py); NotFoundError otherwise."""
    return check_organizes(session, user, competition_id)


def create_competition(session: Session, body: CompetitionCreate, owner: User,
                       now: datetime) -> Competition:
    if session.execute(select(Competition.id).where(Competition.slug == body.slug)).first():
        raise ConflictError(f"the slug {body.slug!r} is taken; choose another",
                            code="competition.exists")
    comp = Competition(slug=body.slug, title=body.title, description=body.description,
                       participation=body.participation, owner_id=owner.id, created_at=now,
                       terms=body.terms, tabs=body.tabs.model_dump(),
                       teams_allowed=body.teams.allowed, team_max_size=body.teams.max_size,
                       teams_lock_at=body.teams.lock_at)
    session.add(comp)
    session.flush()
    for phase in body.phases:
        add_phase(session, comp, phase, owner, now)
    session.add(AuditLog(actor_id=owner.id, action="competition.create",
                         target=f"competition:{comp.id}", details={"slug": comp.slug}, at=now))
    session.commit()  # the operation owns its transaction (docs/internals.md, "Commits")
    return comp


def add_phase(session: Session, comp: Competition, body: PhaseCreate, actor: User,
              now: datetime) -> Phase:
    if any(p.name == body.name for p in comp.phases):
        raise ConflictError(f"competition {comp.slug!r} already has a phase {body.name!r}",
                            code="phase.exists")
    phase = Phase(competition_id=comp.id, created_at=now,
                  **_rules_columns(None, body.model_dump(mode="python")))
    _check_phase(session, phase, actor)
    session.add(phase)
    session.flush()
    comp.phases.append(phase)
    session.add(AuditLog(actor_id=actor.id, action="phase.create", target=f"phase:{phase.id}",
                         details={"name": phase.name}, at=now))
    return phase


def update_phase(session: Session, phase: Phase, changes: dict[str, Any], actor: User,
                 now: datetime) -> Phase:
    if changes.get("leaderboard") is not None and (phase.leaderboard or {}).get("published_at"):
        # Publishing is an audited action (services/secrecy.py), not a setting a PATCH resets.
        changes["leaderboard"] = {**changes["leaderboard"],
                                  "published_at": phase.leaderboard["published_at"]}
    for key, value in _rules_columns(phase, changes).items():
        setattr(phase, key, value)
    _check_phase(session, phase, actor)
    session.add(AuditLog(actor_id=actor.id, action="phase.update", target=f"phase:{phase.id}",
                         details={"fields": sorted(changes)}, at=now))
    session.commit()
    return phase


def update_competition(session: Session, comp: Competition, changes: dict[str, Any]) -> None:
    """Set the given fields (already checked by CompetitionUpdate) and commit."""
    for key, value in changes.items():
        setattr(comp, key, value)
    session.commit()


def create_phase(session: Session, comp: Competition, body: PhaseCreate, actor: User,
                 now: datetime) -> Phase:
    """One more phase of an existing competition (`add_phase`, which a new competition's
    phases share, only flushes), committed."""
    phase = add_phase(session, comp, body, actor, now)
    session.commit()
    return phase
