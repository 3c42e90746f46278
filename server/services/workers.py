"""Worker status: who is evaluating what, as the internal API hears it.

A worker names itself in its claim body (`worker`); heartbeats and finishes are attributed to
the run's lease owner. Each call upserts the worker's row (last seen, current run, stage,
announced GPUs), so organizers see live and silent workers without any worker-side database.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from server.core.errors import InvalidInputError
from server.models import ACTIVE_STATES, Run, Submission, User, Worker, WorkerPool
from server.services.tenancy import organized_phase_ids
from submission_api.storable_text import storable_text

log = logging.getLogger(__name__)


def _row(session: Session, name: str, now: datetime, pool_id: int | None) -> Worker:
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # Names are unique per pool (two partial unique indexes): the conflict names the one.
    shared = pool_id is None
    mine: ColumnElement[bool] = (Worker.pool_id.is_(None) if shared
                                 else Worker.pool_id == pool_id)
    session.execute(insert(Worker).values(
        name=name, pool_id=pool_id, first_seen_at=now, last_seen_at=now, gpus=[],
        runs_claimed=0,
    ).on_conflict_do_nothing(
        index_elements=["name"] if shared else ["pool_id", "name"],
        index_where=Worker.pool_id.is_(None) if shared else Worker.pool_id.is_not(None)))
    return session.execute(select(Worker).where(Worker.name == name, mine)
                           .execution_options(populate_existing=True)).scalar_one()


def record_worker(session: Session, name: str | None, now: datetime, *,
                  run_id: int | None, stage: str | None, claimed: bool = False,
                  gpus: list[Any] | None = None, images: list[str] | None = None,
                  fault: str | None = None, unhealthy: str | None = None,
                  pool_id: int | None = None, host: str | None = None,
                  task_isolation: str | None = None, host_lock: bool | None = None) -> None:
    """Note that worker `name` (of pool `pool_id`; None: a shared worker) was heard from,
    holding `run_id` at `stage` (None: idle), with the images it reported, the details of a
    platform fault it released a run for, why it stopped claiming (`unhealthy`; a claim
    that goes through clears it), what its start-up isolation probe found (issue 34) and
    whether it holds its host alone for a secret phase's run (`host_lock`)."""
    if not name:
        return
    worker = _row(session, name[:200], now, pool_id)
    if host is not None:
        worker.host = storable_text(host)[:200]
    worker.last_seen_at = now
    worker.current_run_id, worker.stage = run_id, stage
    if claimed:
        worker.runs_claimed += 1
        worker.unhealthy, worker.unhealthy_at = None, None
    if unhealthy is not None:
        worker.unhealthy, worker.unhealthy_at = storable_text(unhealthy), now
    if gpus is not None:
        worker.gpus = list(gpus)
    if images is not None:
        worker.images = sorted(set(images))
    if task_isolation is not None:
        worker.task_isolation = task_isolation
    if host_lock is not None:
        worker.host_lock = host_lock
    if fault is not None:
        worker.last_fault, worker.last_fault_at = storable_text(fault), now
    session.flush()


def check_image_known(session: Session, image: str | None, where: str,
                      competition_id: int | None = None) -> None:
    """Refuse a phase image that no worker that may serve it reported having.

    Workers report their engine's images with each claim; a phase naming an image none holds
    would fail every run as a platform error (issue 13). When no worker has reported images
    yet (a fresh deployment, or only the unsandboxed local executor), nothing can be checked.
    The workers counted are the shared ones and those of `competition_id`'s own pools: another
    competition's pool neither serves the phase nor may have its images named to this
    organizer (issue 37).

    Raises:
        InvalidInputError: (`phase.unknown_image`) with the images workers do have.
    """
    if not image:
        return
    own_pools = select(WorkerPool.id).where(WorkerPool.competition_id == competition_id)
    reported = [w for w in session.execute(
        select(Worker.images).where(Worker.images.is_not(None),
                                    Worker.pool_id.is_(None) | Worker.pool_id.in_(own_pools))
    ).scalars()]
    known = sorted({name for images in reported for name in images or []})
    if not reported or image in known:
        return
    raise InvalidInputError(
        f"{where} names the sandbox image {image!r}, which no worker has (workers report "
        f"{known[:20]}); build or pull it on the workers first "
        "(scripts/build_sandbox_image.sh), or name one of theirs, or leave the image unset "
        "for the workers' default", code="phase.unknown_image")


def list_workers(session: Session, now: datetime, silent_after_s: int,
                 with_pools: bool = False) -> list[dict[str, Any]]:
    """Every known shared worker (with `with_pools`, the operator's view: pool workers too,
    each with its `pool_id`), most recently seen first, with a `silent` flag. Organizers see
    their pools' workers on the pool's own page only (issue 37).

    The run a worker holds is read from the runs' live leases, never from the worker's last
    report alone: a worker stopped while it held run 5 (its row still saying so) shows no run
    once its lease is gone, beside the worker that holds run 5 now (issue 32.6). A silent
    worker (no call for `silent_after_s`) holds nothing: its lease has lapsed by then."""
    query = select(Worker).order_by(Worker.last_seen_at.desc())
    if not with_pools:
        query = query.where(Worker.pool_id.is_(None))
    rows = list(session.execute(query).scalars())
    limit = now - timedelta(seconds=silent_after_s)
    live = live_leases(session, now)
    isolation = last_isolation(session, [w.name for w in rows])
    listed = []
    for w in rows:
        silent = w.last_seen_at < limit
        held = None if silent else live.get(w.name)
        listed.append({
            "name": w.name, "first_seen_at": w.first_seen_at, "last_seen_at": w.last_seen_at,
            "current_run_id": held, "stage": w.stage if held is not None else None,
            "gpus": w.gpus or [], "runs_claimed": w.runs_claimed, "silent": silent,
            "images": w.images, "last_fault": w.last_fault, "last_fault_at": w.last_fault_at,
            "unhealthy": w.unhealthy, "unhealthy_at": w.unhealthy_at, "pool_id": w.pool_id,
            "isolation": isolation.get(w.name), "task_isolation": w.task_isolation,
            "host_lock": w.host_lock})
    return mark_shared_names(listed)


def last_isolation(session: Session, names: list[str]) -> dict[str, str]:
    """Worker name -> the isolation line of the latest run it finished that reported one
    (issue 34.4): a host that falls back to shared namespaces for its test tasks shows it."""
    if not names:
        return {}
    rows = session.execute(select(Run.lease_owner, Run.isolation).where(
        Run.lease_owner.in_(names), Run.isolation.is_not(None)).order_by(Run.id)).all()
    return {str(owner): str(line) for owner, line in rows}


def mark_shared_names(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`shared_by`: how many live processes report under this row's configured name (the part
    before '@host:pid:random'); above 1, two workers were started with one ARENA_WORKER_NAME."""
    live = [w["name"].split("@", 1)[0] for w in rows if not w["silent"]]
    return [{**w, "shared_by": live.count(w["name"].split("@", 1)[0]) if not w["silent"]
             else 0} for w in rows]


def live_leases(session: Session, now: datetime) -> dict[str, int]:
    """Lease owner -> the run it holds now (an active run whose lease has not expired)."""
    rows = session.execute(select(Run.lease_owner, Run.id).where(
        Run.state.in_(ACTIVE_STATES), Run.lease_expires_at > now,
        Run.lease_owner.is_not(None)).order_by(Run.id)).all()
    return {str(owner): run_id for owner, run_id in rows}


def broker_workers(queue: object, timeout_s: float = 0.5) -> list[str]:
    """Workers that answer a ping through the broker, idle ones included (a worker reports to
    the server only when it takes a run, so the dashboard would say none is there); [] when
    the broker cannot be asked (a queue without pings, or a broker failure, logged)."""
    ping = getattr(queue, "ping_workers", None)
    if ping is None:
        return []
    try:
        return [name.split("@", 1)[-1] for name in ping(timeout_s)]
    except Exception:  # noqa: BLE001 - the dashboard renders without it
        log.warning("workers.ping.failed", exc_info=True)
        return []


def mask_foreign_runs(session: Session, user: User, rows: list[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """Hide which run a worker holds unless the run is in a competition `user` organizes."""
    held = [w["current_run_id"] for w in rows if w["current_run_id"] is not None]
    theirs = set(session.execute(
        select(Run.id).join(Submission)
        .where(Run.id.in_(held), Submission.phase_id.in_(organized_phase_ids(user))))
        .scalars()) if held else set()
    return [w if w["current_run_id"] in theirs or w["current_run_id"] is None
            else {**w, "current_run_id": None, "stage": "busy"} for w in rows]


UNHEALTHY_FOR_ORGANIZERS = ("its own disk or sandbox engine fails; the operators see why on "
                            "/admin/workers")
"""What organizers read for an unhealthy worker: the reason names host paths (operators only)."""


def hide_host_details(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as an organizer sees them: no fault details, an unhealthy state without its reason
    (both name hosts, paths and other competitions' runs: operators only)."""
    return [{**w, "last_fault": None,
             "unhealthy": UNHEALTHY_FOR_ORGANIZERS if w["unhealthy"] else None} for w in rows]


def record_unhealthy(session: Session, name: str, reason: str, now: datetime,
                     pool_id: int | None = None) -> None:
    """Worker `name` withheld a claim because its own resources fail: shown on the workers
    page until one of its claims goes through; committed. The run stays queued, untouched."""
    record_worker(session, name, now, run_id=None, stage=None, unhealthy=reason,
                  pool_id=pool_id)
    session.commit()
