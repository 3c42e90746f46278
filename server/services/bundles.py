"""Building and updating a competition from a parsed bundle, in one transaction.

Phases are matched by name: a bundle update changes the phases it names and adds new ones;
it refuses to drop a phase the server has (submissions hang off it) — close it instead.
A phase that is open must name registered datasets only; the error points at the bundle line.
Every change is audited (`competition.bundle.create` / `competition.bundle.update`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.bundles.parse import ParsedBundle, Problem, raise_problems, where
from server.bundles.schema import PhaseSpec
from server.core.errors import ConflictError, InvalidInputError
from server.models import AuditLog, Competition, Phase, User
from server.services.datasets import usable_hashes
from server.services.workers import check_image_known


def phase_values(spec: PhaseSpec, data: dict[str, Any]) -> dict[str, Any]:
    """Phase column values for one phase of a bundle (carry_from is linked afterwards)."""
    board = spec.leaderboard
    return {
        "description": spec.description, "status": spec.status, "starts_at": spec.starts_at,
        "ends_at": spec.ends_at, "protocol": spec.protocol, "data": data, "seed": spec.seed,
        "runs_per_submission": spec.runs_per_submission, "time_limit_s": spec.time_limit,
        "resources": {"gpus": spec.resources.gpus, "cpus": spec.resources.cpus,
                      "memory_mb": spec.resources.memory, "pids": spec.resources.pids,
                      "shm_mb": spec.resources.shm, "tmp_mb": spec.resources.tmp,
                      "output_mb": spec.resources.output},
        "image": spec.image, "queue": spec.queue, "quota_per_day": spec.quotas.per_day,
        "quota_total": spec.quotas.total, "quota_in_flight": spec.quotas.in_flight,
        "hide_logs": spec.hide_logs, "leaderboard_rule": board.rule,
        "leaderboard": {"ranking": board.ranking, "columns": list(board.columns),
                        "hidden": board.hidden, "statistics": board.statistics},
        "factsheet": [q.model_dump() for q in spec.factsheet],
    }


def check_datasets_registered(session: Session, parsed: ParsedBundle, actor: User) -> None:
    """Every dataset of an open phase must be registered and usable by `actor`
    (services/datasets.py); errors name the bundle line."""
    wanted = {ref["content_hash"] for data in parsed.data.values()
              for role in ("meta_train", "meta_valid", "meta_test") for ref in data.get(role, [])}
    known = usable_hashes(session, actor, wanted)
    problems = []
    for index, phase in enumerate(parsed.spec.phases):
        if phase.status != "open":
            continue
        for role in ("meta_train", "meta_valid", "meta_test"):
            for i, ref in enumerate(parsed.data[phase.name].get(role, [])):
                if ref["content_hash"] not in known:
                    path = ("phases", index, "data", role, i)
                    problems.append(Problem(
                        parsed.lines.line_of(path), where(path),
                        f"dataset {ref['name']}@{ref['content_hash']} is not registered (or "
                        "not by you); "
                        "register it (POST /api/v1/datasets) or let `arena competition "
                        "create` compile and register the collection"))
    raise_problems(problems)


def check_images_known(session: Session, parsed: ParsedBundle) -> None:
    """Every phase's sandbox image must be one a worker reported (services/workers.py); errors
    name the bundle line."""
    problems = []
    for index, phase in enumerate(parsed.spec.phases):
        try:
            check_image_known(session, phase.image, f"phase {phase.name!r}")
        except InvalidInputError as error:
            path = ("phases", index, "image")
            problems.append(Problem(parsed.lines.line_of(path), where(path), str(error)))
    raise_problems(problems)


def _apply_competition(comp: Competition, parsed: ParsedBundle, text: str) -> None:
    spec = parsed.spec
    comp.title, comp.description = spec.title, spec.description
    comp.participation = spec.participation
    comp.pages = [p.model_dump() for p in spec.pages]
    comp.terms, comp.tabs = spec.terms, spec.tabs.model_dump()
    comp.teams_allowed, comp.team_max_size = spec.teams.allowed, spec.teams.max_size
    comp.teams_lock_at = spec.teams.lock_at
    comp.leagues = [lg.model_dump() for lg in spec.leagues]
    comp.bundle = text


def _apply_phases(session: Session, comp: Competition, parsed: ParsedBundle,
                  now: datetime) -> list[str]:
    """Create or update every phase of the bundle; returns the names of new phases."""
    existing = {p.name: p for p in comp.phases}
    added = []
    for spec in parsed.spec.phases:
        values = phase_values(spec, parsed.data[spec.name])
        phase = existing.get(spec.name)
        if phase is None:
            phase = Phase(competition_id=comp.id, name=spec.name, created_at=now, **values)
            session.add(phase)
            comp.phases.append(phase)
            added.append(spec.name)
        else:
            for key, value in values.items():
                setattr(phase, key, value)
    session.flush()
    by_name = {p.name: p for p in comp.phases}
    for spec in parsed.spec.phases:
        by_name[spec.name].carry_from_id = (by_name[spec.carry_from].id
                                            if spec.carry_from else None)
    session.flush()
    return added


def create_from_bundle(session: Session, parsed: ParsedBundle, text: str, actor: User,
                       now: datetime) -> Competition:
    """A new competition with every phase of the bundle."""
    slug = parsed.spec.slug
    if session.execute(select(Competition.id).where(Competition.slug == slug)).first():
        raise ConflictError(f"the slug {slug!r} is taken; update it with `arena competition "
                            f"update` (PUT /api/v1/competitions/{slug}/bundle) or change the "
                            "slug", code="competition.exists")
    check_datasets_registered(session, parsed, actor)
    check_images_known(session, parsed)
    comp = Competition(slug=slug, title=parsed.spec.title, owner_id=actor.id, created_at=now)
    _apply_competition(comp, parsed, text)
    session.add(comp)
    session.flush()
    added = _apply_phases(session, comp, parsed, now)
    session.add(AuditLog(actor_id=actor.id, action="competition.bundle.create",
                         target=f"competition:{comp.id}",
                         details={"slug": slug, "phases": added}, at=now))
    return comp


def update_from_bundle(session: Session, comp: Competition, parsed: ParsedBundle, text: str,
                       actor: User, now: datetime) -> Competition:
    """Apply a bundle to an existing competition (same slug)."""
    if parsed.spec.slug != comp.slug:
        raise InvalidInputError(f"the bundle's slug is {parsed.spec.slug!r} but competition "
                                f"{comp.id} is {comp.slug!r}; a bundle cannot rename a "
                                "competition", code="bundle.slug_mismatch")
    dropped = sorted({p.name for p in comp.phases} - {p.name for p in parsed.spec.phases})
    if dropped:
        raise InvalidInputError(f"the bundle lacks phases {dropped} that the competition has; "
                                "phases cannot be removed (their submissions depend on them) "
                                "— keep them, with status: closed if they are over",
                                code="bundle.phase_removed")
    check_datasets_registered(session, parsed, actor)
    check_images_known(session, parsed)
    _apply_competition(comp, parsed, text)
    added = _apply_phases(session, comp, parsed, now)
    session.add(AuditLog(actor_id=actor.id, action="competition.bundle.update",
                         target=f"competition:{comp.id}",
                         details={"slug": comp.slug, "added_phases": added}, at=now))
    return comp
