"""The organizer's "Worker pools" pages (issue 37): the pools of the competitions they organize
(admins: every pool), each pool's workers, queue and wait times, credentials and phases.

Every action is a form POST with the session's CSRF token that calls the same service as the
JSON API (server/services/pools.py); authorization is the service's (an organizer of the pool's
competition, or an admin; any other pool is "not found"). A new credential is shown once, on
the answer to the POST that made it, never in a URL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.api.deps import (
    SESSION_COOKIE,
    NowDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    get_db,
    get_queue,
)
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError, ForbiddenError, NotFoundError
from server.models import Competition, Phase, PoolPhase, User, WorkerPool
from server.services import pools as pool_service
from server.services import users as user_service
from server.services.queue import JobQueue, enqueue_quietly
from server.services.tenancy import is_admin, is_staff, organized_competition_ids
from server.services.timeline import format_duration
from server.web.rendering import PageRoute, check_csrf, login_redirect, render

router = APIRouter(include_in_schema=False, route_class=PageRoute)
# Fixed texts only: a notice is never taken from the URL.
NOTICES = {"revoked": "The credential was revoked: workers holding it are refused at their "
                      "next call and stop.",
           "attached": "The phase is now served by this pool: its waiting runs wait for this "
                       "pool's workers.",
           "detached": "The phase is served by the platform's shared workers again: its "
                       "waiting runs were queued there."}


def _staff(user: User | None) -> User:
    if user is None:
        raise AuthRequiredError("log in to manage worker pools")
    if not is_staff(user):
        raise ForbiddenError("worker pools are managed by a competition's organizers; you are "
                             f"{user.role!r} — ask an admin if you should be one")
    return user


def _form_user(request: Request, session: Session, now: datetime) -> User:
    return _staff(user_service.user_for_token(session, request.cookies.get(SESSION_COOKIE, ""),
                                              now))


def _wait(seconds: float | None) -> str:
    return "" if seconds is None else format_duration(seconds)


def _pool_row(session: Session, pool: WorkerPool, now: datetime) -> dict[str, Any]:
    """A pool as the list shows it: its phases, live workers and waiting runs."""
    workers = pool_service.pool_workers(session, pool.id, now)
    phases = session.execute(select(Phase).join(PoolPhase, PoolPhase.phase_id == Phase.id)
                             .where(PoolPhase.pool_id == pool.id).order_by(Phase.id)).scalars()
    return {**pool_service.pool_summary(pool), "phases": list(phases),
            "live_workers": sum(w["health"] == "live" for w in workers),
            "queued": pool_service.pool_queue(session, pool.id, now)["queued"]}


@router.get("/organizer/pools")
def pools_page(request: Request, user: OptionalUser, session: SessionDep,
               settings: SettingsDep, now: NowDep) -> Response:
    """The pools per competition the viewer organizes, with a create form on each (admins:
    every competition that has a pool too)."""
    if user is None:
        return login_redirect(request, "organizer")
    _staff(user)
    mine = set(session.execute(organized_competition_ids(user)).scalars())
    pools = ([p for p, _c in pool_service.all_pools(session)] if is_admin(user) else
             [p for cid in sorted(mine) for p in pool_service.list_pools(session, user, cid)])
    ids = mine | {p.competition_id for p in pools}
    comps = session.execute(select(Competition).where(Competition.id.in_(ids))
                            .order_by(Competition.id)).scalars()
    competitions = [{"competition": c, "may_create": c.id in mine,
                     "pools": [_pool_row(session, p, now) for p in pools
                               if p.competition_id == c.id]} for c in comps]
    return render(request, "pools.html", user, settings,
                  competitions=[c for c in competitions if c["may_create"] or c["pools"]])


def _pool_page(request: Request, session: Session, settings: Settings, now: datetime,
               user: User, pool_id: int,
               new_token: str | None = None, notice: str | None = None,
               status: int = 200) -> Response:
    detail = pool_service.pool_detail(session, user, pool_id, now)  # 404 unless theirs
    competition = session.get_one(Competition, detail["competition_id"])  # the pool's: cascade
    phase_ids = [p.id for p in competition.phases]
    served = {phase_id: pool for phase_id, pool in session.execute(
        select(PoolPhase.phase_id, PoolPhase.pool_id).where(PoolPhase.phase_id.in_(phase_ids)))}
    names = {p.id: p.name for p in pool_service.list_pools(session, user, competition.id)}
    phases = [{"id": p.id, "name": p.name, "pool_id": served.get(p.id),
               "pool_name": names.get(served.get(p.id) or 0, "")}
              for p in sorted(competition.phases, key=lambda p: p.id)]
    queue = detail["queue"]
    return render(request, "pool.html", user, settings, status=status, pool=detail,
                  competition=competition, workers=detail["workers"], queue=queue,
                  waits={"oldest": _wait(queue.get("oldest_wait_s")),
                         "median": _wait(queue.get("median_wait_s"))},
                  credentials=detail["credentials"], competition_phases=phases,
                  new_token=new_token, notice=notice,
                  base_url=settings.public_url_for(str(request.base_url)).rstrip("/"))


@router.get("/organizer/pools/{pool_id}")
def pool_page(pool_id: int, request: Request, user: OptionalUser, session: SessionDep,
              settings: SettingsDep, now: NowDep) -> Response:
    if user is None:
        return login_redirect(request, "organizer")
    return _pool_page(request, session, settings, now, _staff(user), pool_id,
                      notice=NOTICES.get(request.query_params.get("done", "")))


@router.post("/organizer/competitions/{competition_id}/pools")
async def create_pool(competition_id: int, request: Request, settings: SettingsDep,
                      now: NowDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    """Create a pool; the answer is its page with the first credential, shown once."""
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    name = str(form.get("name") or "").strip()
    with db.session(write=True) as session:
        user = _form_user(request, session, now)
        pool, token = pool_service.create_pool(session, user, competition_id, name, now)
        pool_id = pool.id
    with db.session() as session:
        user = _form_user(request, session, now)
        return _pool_page(request, session, settings, now, user, pool_id, new_token=token,
                          status=201)


@router.post("/organizer/pools/{pool_id}/tokens")
async def issue_token(pool_id: int, request: Request, settings: SettingsDep, now: NowDep,
                      db: Annotated[Database, Depends(get_db)]) -> Response:
    """Issue another credential; the answer shows it once."""
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        user = _form_user(request, session, now)
        _credential, token = pool_service.issue_credential(session, user, pool_id, now)
    with db.session() as session:
        user = _form_user(request, session, now)
        return _pool_page(request, session, settings, now, user, pool_id, new_token=token,
                          status=201)


@router.post("/organizer/pools/{pool_id}/tokens/{credential_id}/revoke")
async def revoke_token(pool_id: int, credential_id: int, request: Request,
                       settings: SettingsDep, now: NowDep,
                       db: Annotated[Database, Depends(get_db)]) -> Response:
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        user = _form_user(request, session, now)
        pool_service.revoke_credential(session, user, pool_id, credential_id, now)
    return RedirectResponse(f"/organizer/pools/{pool_id}?done=revoked", status_code=303)


@router.post("/organizer/phases/{phase_id}/pool")
async def attach_phase(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
                       db: Annotated[Database, Depends(get_db)],
                       queue: Annotated[JobQueue, Depends(get_queue)]) -> Response:
    """Attach the phase to a pool (field `pool_id`) or, with it empty, detach it; runs waiting
    on a detached phase are enqueued on the shared workers after the commit."""
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    raw, back = str(form.get("pool_id") or ""), str(form.get("back") or "")
    if raw and not raw.isdigit() or back and not back.isdigit():
        raise NotFoundError("no such pool among those you manage")
    pool_id = int(raw) if raw else None
    with db.session(write=True) as session:
        user = _form_user(request, session, now)
        jobs = pool_service.set_phase_pool(session, user, phase_id, pool_id, now,
                                           settings.default_queue)
    enqueue_quietly(queue, jobs)
    done = "attached" if pool_id is not None else "detached"
    target = pool_id or (int(back) if back else None)
    return RedirectResponse(f"/organizer/pools/{target}?done={done}" if target
                            else "/organizer/pools", status_code=303)
