"""Building and updating a competition from a parsed bundle, in one transaction.

Phases are matched by name: a bundle update changes the phases it names and adds new ones;
it refuses to drop a phase the server has (submissions hang off it) — close it instead.
A phase that is open must name registered datasets only; the error points at the bundle line.
A phase's status changes only when the bundle says `status:` (services.bundle_changes); an
update can be previewed as a list of changes (`preview_update`), and its audit entry
(`competition.bundle.create` / `competition.bundle.update`) keeps that list. An update that
changes what a scored phase measures is refused unless the organizer chooses to re-run its
entries or start a new phase (services.scored_changes).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.bundles.parse import ParsedBundle, Problem, raise_problems, where
from server.bundles.schema import PhaseSpec
from server.core.errors import ConflictError, InvalidInputError
from server.models import AuditLog, Competition, Dataset, Phase, User
from server.services.bundle_changes import changes_out, compute_changes, intended_status
from server.services.datasets import usable_hashes
from server.services.operations import rerun_submission
from server.services.scored_changes import (
    archive_phases,
    archived_base,
    check_choice,
    describe_scored,
    find_scored_changes,
    scored_submissions,
)
from server.services.workers import check_image_known


def phase_values(spec: PhaseSpec, data: dict[str, Any],
                 existing: Phase | None = None) -> dict[str, Any]:
    """Phase column values for one phase of a bundle (carry_from is linked afterwards);
    `existing` is the phase the bundle updates, whose status stays unless the bundle names one."""
    board = spec.leaderboard
    return {
        "description": spec.description, "status": intended_status(spec, existing),
        "starts_at": spec.starts_at, "ends_at": spec.ends_at, "data": data,
        **spec.rules().to_columns(),
        "image": spec.image, "queue": spec.queue,
        "hide_logs": spec.hide_logs, "leaderboard_rule": board.rule,
        "leaderboard": {"ranking": board.ranking, "columns": list(board.columns),
                        "hidden": board.hidden, "statistics": board.statistics,
                        **({"test_data": board.test_data} if board.test_data else {})},
        "factsheet": [q.model_dump() for q in spec.factsheet],
    }


def check_datasets_registered(session: Session, parsed: ParsedBundle, actor: User,
                              comp: Competition | None = None) -> None:
    """Every dataset of a phase that will be open must be registered and usable by `actor`
    (services/datasets.py), and no phase of any status may name a dataset another organizer
    registered; errors name the bundle line."""
    existing = {p.name: p for p in comp.phases} if comp is not None else {}
    wanted = {ref["content_hash"] for data in parsed.data.values()
              for role in ("meta_train", "meta_valid", "meta_test") for ref in data.get(role, [])}
    known = usable_hashes(session, actor, wanted)
    registered = set(session.execute(select(Dataset.content_hash).where(
        Dataset.content_hash.in_(list(wanted)))).scalars()) if wanted else set()
    problems = []
    for index, phase in enumerate(parsed.spec.phases):
        opens = intended_status(phase, existing.get(phase.name)) == "open"
        for role in ("meta_train", "meta_valid", "meta_test"):
            for i, ref in enumerate(parsed.data[phase.name].get(role, [])):
                path = ("phases", index, "data", role, i)
                if ref["content_hash"] in registered and ref["content_hash"] not in known:
                    # Tenancy (issue 20, D1): another organizer's data, in a phase of any status.
                    problems.append(Problem(
                        parsed.lines.line_of(path), where(path),
                        f"dataset {ref['name']}@{ref['content_hash']} is registered by another "
                        "organizer, and a phase of any status may name only datasets you may "
                        "use (ones you registered or were granted); remove it from this phase"))
                elif opens and ref["content_hash"] not in known:
                    problems.append(Problem(
                        parsed.lines.line_of(path), where(path),
                        f"dataset {ref['name']}@{ref['content_hash']} is not registered (or "
                        "not by you); "
                        "register it (POST /api/v1/datasets) or let `arena competition "
                        "create` compile and register the collection"))
    raise_problems(problems)


# Protocols whose meta-test tasks come from the meta-train datasets by design (their classes or
# images are split per dataset, submission_api.protocols.splits); everywhere else a dataset in
# both lists means the submission meta-trains on the data it is tested on.
SHARED_DATASET_PROTOCOLS = frozenset({"within-domain"})


def check_train_test_disjoint(parsed: ParsedBundle) -> None:
    """A phase may not meta-test on a dataset it also meta-trains on (unless its protocol
    splits each dataset itself); the error names the meta_test line and the fix."""
    problems = []
    for index, phase in enumerate(parsed.spec.phases):
        protocol = (phase.protocol or {}).get("name", "cross-domain")
        if protocol in SHARED_DATASET_PROTOCOLS:
            continue
        data = parsed.data[phase.name]
        train = {ref["content_hash"] or ref["name"] for ref in data.get("meta_train", [])}
        for i, ref in enumerate(data.get("meta_test", [])):
            if (ref["content_hash"] or ref["name"]) in train:
                path = ("phases", index, "data", "meta_test", i)
                problems.append(Problem(
                    parsed.lines.line_of(path), where(path),
                    f"dataset {ref['name']} is in both meta_train and meta_test of phase "
                    f"{phase.name!r} (protocol {protocol}): submissions would be tested on "
                    "data they meta-trained on; remove it from one of the lists, or use "
                    "protocol within-domain, which splits each dataset's classes"))
    raise_problems(problems)


def check_images_known(session: Session, parsed: ParsedBundle,
                       competition_id: int | None = None) -> None:
    """Every phase's sandbox image must be one a worker reported (services/workers.py); errors
    name the bundle line."""
    problems = []
    for index, phase in enumerate(parsed.spec.phases):
        try:
            check_image_known(session, phase.image, f"phase {phase.name!r}", competition_id)
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
        phase = existing.get(spec.name)
        values = phase_values(spec, parsed.data[spec.name], phase)
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
    check_train_test_disjoint(parsed)
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
    session.commit()
    return comp


def preview_update(session: Session, comp: Competition, parsed: ParsedBundle,
                   actor: User) -> dict[str, Any]:
    """What `update_from_bundle` would change, checked as it checks, writing nothing:
    `{"changes": [{phase, field, old, new, text}], "added_phases": [...]}`."""
    _check_update(session, comp, parsed, actor)
    scored = find_scored_changes(session, list(comp.phases), parsed, phase_values)
    return changes_out(*compute_changes(comp, parsed, phase_values)) | {
        "scored": describe_scored(scored)}


def _check_update(session: Session, comp: Competition, parsed: ParsedBundle,
                  actor: User) -> None:
    if parsed.spec.slug != comp.slug:
        raise InvalidInputError(f"the bundle's slug is {parsed.spec.slug!r} but competition "
                                f"{comp.id} is {comp.slug!r}; a bundle cannot rename a "
                                "competition", code="bundle.slug_mismatch")
    named = {p.name for p in parsed.spec.phases}
    dropped = sorted({p.name for p in comp.phases if archived_base(p.name) not in named}
                     - named)
    if dropped:
        raise InvalidInputError(f"the bundle lacks phases {dropped} that the competition has; "
                                "phases cannot be removed (their submissions depend on them) "
                                "— keep them, with status: closed if they are over",
                                code="bundle.phase_removed")
    check_train_test_disjoint(parsed)
    check_datasets_registered(session, parsed, actor, comp)
    check_images_known(session, parsed, comp.id)


def update_from_bundle(session: Session, comp: Competition, parsed: ParsedBundle, text: str,
                       actor: User, now: datetime, on_scored: str | None = None,
                       default_queue: str = "default") -> list[tuple[int, str, str]]:
    """Apply a bundle to an existing competition (same slug); fields it leaves out take the
    schema's defaults, except phase status (kept unless the bundle names one). A change to what
    a scored phase measures needs `on_scored` (services.scored_changes). Commits; returns the jobs
    of the re-runs, to enqueue after that commit; entries whose runs are still queued are not
    re-run (they run on the new settings)."""
    _check_update(session, comp, parsed, actor)
    scored = find_scored_changes(session, list(comp.phases), parsed, phase_values)
    check_choice(scored, on_scored)
    diff = changes_out(*compute_changes(comp, parsed, phase_values))
    if on_scored == "new_phase" and scored:
        archive_phases(session, scored, now)
    _apply_competition(comp, parsed, text)
    added = _apply_phases(session, comp, parsed, now)
    jobs: list[tuple[int, str, str]] = []
    if on_scored == "rerun":
        for change in scored:
            for submission in scored_submissions(session, change.phase.id):
                jobs += rerun_submission(session, submission, actor, now,
                                         change.phase.queue or default_queue,
                                         f"the bundle update changed {', '.join(change.fields)}")
    session.add(AuditLog(actor_id=actor.id, action="competition.bundle.update",
                         target=f"competition:{comp.id}",
                         details={"slug": comp.slug, "added_phases": added,
                                  "on_scored": on_scored, "scored": describe_scored(scored),
                                  "changes": [{k: c[k] for k in ("phase", "field", "old", "new")}
                                              for c in diff["changes"]]}, at=now))
    session.commit()
    return jobs
