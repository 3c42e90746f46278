"""Competitions and phases: public listing, organizer creation and updates."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.api.deps import (
    CurrentUser,
    NowDep,
    OptionalUser,
    Organizer,
    SessionDep,
    WriteSessionDep,
)
from server.api.paging import MAX_LIMIT, MAX_OFFSET, Page, PageDep, paged
from server.core.errors import NotFoundError
from server.models import Competition, Phase, User, utcnow
from server.schemas.competition import (
    CompetitionCreate,
    CompetitionOut,
    CompetitionUpdate,
    PhaseCreate,
    PhaseOut,
    PhaseUpdate,
    QuotaLeft,
    QuotaOut,
)
from server.schemas.pool import PhaseServedOut, ServingOut
from server.services import competitions as service
from server.services.pools import phase_serving
from server.services.quotas import quota_left
from server.services.secrecy import published_at, results_state, test_data_level
from server.services.seeds import redact_protocol
from server.services.tenancy import (
    is_admin,
    organized_phase_ids,
    organizes_competition,
    visible_competitions_query,
    visible_phase,
)
from server.services.timeline import accepts_uploads, effective_status, phase_step

PHASES_LIMIT = 500
"""`/phases`'s default page (kept from the second round: clients listed every phase)."""
router = APIRouter(prefix="/api/v1", tags=["competitions"])


def find_competition(session: Session, ref: str, user: User | None) -> Competition:
    """A competition by id or slug; 404 when unknown (or only drafts, for non-staff)."""
    query = select(Competition).where(
        Competition.id == int(ref) if ref.isdigit() else Competition.slug == ref)
    comp = session.execute(query).scalar_one_or_none()
    if comp is None or (not organizes_competition(user, comp)
                        and not competition_out(comp, user).phases):
        raise NotFoundError(f"no competition {ref!r}; list them at /api/v1/competitions")
    return comp


def phase_out(phase: Phase, now: datetime | None = None, staff: bool = False) -> PhaseOut:
    """The phase as seen at `now`: its status and acceptance read its dates. Seeds, split seed
    and dataset hashes only for staff: with them and public data the test tasks are
    reproducible (services/seeds.py). `staff` means: the viewer organizes this phase's
    competition (services/tenancy.py), not merely holds an organizer role."""
    now = now or utcnow()
    out = PhaseOut.model_validate(phase)
    out.status = effective_status(phase, now)
    out.accepting_submissions = accepts_uploads(phase, now)
    deadline = phase_step(phase, now).deadline
    out.countdown_s = int((deadline - now).total_seconds()) if deadline else None
    out.test_data, out.results = test_data_level(phase), results_state(phase)
    published = published_at(phase)
    out.published_at = datetime.fromisoformat(published) if published else None
    if not staff:
        out.seed = None
        out.protocol = redact_protocol(out.protocol)
        for refs in (out.data.meta_train, out.data.meta_valid, out.data.meta_test):
            for ref in refs:
                ref.content_hash = None
        if out.test_data == "secret":  # the names say which public datasets are tested on
            out.data.meta_test = []
    return out


def competition_out(comp: Competition, user: User | None,
                    now: datetime | None = None) -> CompetitionOut:
    out = CompetitionOut.model_validate(comp)
    staff = organizes_competition(user, comp)
    out.phases = [phase_out(p, now, staff) for p in comp.phases]
    if not staff:
        out.phases = [p for p in out.phases if p.status != "draft"]
    return out


@router.get("/competitions", response_model=list[CompetitionOut])
def list_competitions(request: Request, response: Response, session: SessionDep,
                      user: OptionalUser, now: NowDep, page: PageDep) -> list[CompetitionOut]:
    """Competitions by id, `limit` at a time (`Link` names the next page; issue 21)."""
    rows = session.execute(page.select(visible_competitions_query(user))).scalars().all()
    return [competition_out(c, user, now) for c in paged(request, response, page, rows,
                                                          fetched=True)]


@router.post("/competitions", response_model=CompetitionOut, status_code=201)
def create_competition(body: CompetitionCreate, user: Organizer, session: WriteSessionDep,
                       now: NowDep) -> CompetitionOut:
    comp = service.create_competition(session, body, user, now)
    return competition_out(comp, user)


@router.get("/competitions/{ref}", response_model=CompetitionOut)
def get_competition(ref: str, session: SessionDep, user: OptionalUser,
                    now: NowDep) -> CompetitionOut:
    """One competition by id or slug, with its pages, leagues and (visible) phases."""
    return competition_out(find_competition(session, ref, user), user, now)


@router.patch("/competitions/{competition_id}", response_model=CompetitionOut)
def update_competition(competition_id: int, body: CompetitionUpdate, user: Organizer,
                       session: WriteSessionDep) -> CompetitionOut:
    comp = service.get_owned_competition(session, competition_id, user)
    service.update_competition(session, comp, body.model_dump(exclude_unset=True))
    return competition_out(comp, user)


@router.post("/competitions/{competition_id}/phases", response_model=PhaseOut, status_code=201)
def create_phase(competition_id: int, body: PhaseCreate, user: Organizer,
                 session: WriteSessionDep, now: NowDep) -> PhaseOut:
    comp = service.get_owned_competition(session, competition_id, user)
    phase = service.create_phase(session, comp, body, user, now)
    return phase_out(phase, now, staff=True)


@router.get("/phases", response_model=list[PhaseOut])
def list_phases(request: Request, response: Response, session: SessionDep,
                user: OptionalUser, now: NowDep,
                limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = PHASES_LIMIT,
                offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> list[PhaseOut]:
    """Phases by id, `limit` at a time from `offset` (`Link` names the next page; issue 21)."""
    page = Page(limit=limit, offset=offset)
    query = select(Phase).order_by(Phase.id)
    if user is None or not is_admin(user):
        query = query.where((Phase.status != "draft") if user is None else (
            (Phase.status != "draft") | Phase.id.in_(organized_phase_ids(user))))
    rows = session.execute(page.select(query)).scalars().all()
    return [phase_out(p, now, organizes_competition(user, p.competition))
            for p in paged(request, response, page, rows, fetched=True)]


@router.get("/phases/{phase_id}", response_model=PhaseServedOut)
def get_phase(phase_id: int, session: SessionDep, user: OptionalUser,
              now: NowDep) -> PhaseServedOut:
    """The phase, with how it is served (`serving`: a worker pool with no live worker says
    so, with the caller's queue position, instead of an estimated start; issue 37)."""
    phase = visible_phase(session, phase_id, user)
    out = phase_out(phase, now, organizes_competition(user, phase.competition))
    return PhaseServedOut(**dict(out), serving=ServingOut(**phase_serving(session, phase, user,
                                                                          now)))


@router.get("/phases/{phase_id}/quota", response_model=QuotaOut)
def my_quota(phase_id: int, session: SessionDep, user: CurrentUser, now: NowDep) -> QuotaOut:
    """Your submissions left in this phase: per day (and when that resets), in total, in
    flight — before you upload, rather than a 429 after."""
    phase = visible_phase(session, phase_id, user)
    left = quota_left(session, user.id, phase, now) or {}

    def part(key: str) -> QuotaLeft | None:
        value = left.get(key)
        return None if value is None else QuotaLeft(left=value[0], limit=value[1])

    return QuotaOut(phase_id=phase.id, accepting_submissions=accepts_uploads(phase, now),
                    resets_at=left.get("resets_at") if left.get("per_day") else None,
                    resets_in_s=int((left["resets_at"] - now).total_seconds())
                    if left.get("per_day") else None,
                    per_day=part("per_day"), total=part("total"), in_flight=part("in_flight"))


@router.patch("/phases/{phase_id}", response_model=PhaseOut)
def update_phase(phase_id: int, body: PhaseUpdate, user: Organizer, session: WriteSessionDep,
                 now: NowDep) -> PhaseOut:
    phase = session.get(Phase, phase_id)
    if phase is None:
        raise NotFoundError(f"no phase with id {phase_id}")
    service.get_owned_competition(session, phase.competition_id, user)
    service.update_phase(session, phase, body.model_dump(exclude_unset=True, mode="python"),
                         user, now)
    return phase_out(phase, now, staff=True)
