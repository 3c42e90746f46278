"""The composition root: `create_app(settings)` wires the real collaborators together.

Nothing connects at import. The engine and storage are built here; migrations, the admin
bootstrap and the periodic reconciler start with the app's lifespan. Tests pass their own
settings, an in-memory job queue and a clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, cast

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from server.core.admission import AdmissionMiddleware
from server.core.body_bounds import BodyBoundsMiddleware
from server.core.config import Settings
from server.core.db import make_database, upgrade_database
from server.core.errors import DatabaseUnavailableError, install_error_handlers
from server.core.hsts import HstsMiddleware
from server.models import utcnow
from server.services.pool_queue import PoolAwareQueue
from server.services.queue import CeleryJobQueue, JobQueue
from server.services.reconcile import ReconcilePolicy, run_reconciler_forever
from server.services.runs import LeasePolicy
from server.services.storage import Storage
from server.services.upload_gate import UploadGate
from server.services.users import bootstrap_admin
from server.web.rendering import install_page_errors, render, wants_html

if TYPE_CHECKING:
    from server.services.reconcile import ReconcileReport

log = logging.getLogger("arena.server")


def operation_id(route: APIRoute) -> str:
    """`<tag>-<function>` (`submissions-create_submission`): stable and readable, so a generated
    client gets method names, not `create_submission_api_v1_phases__phase_id__submissions_post`
    that change whenever a path does (FastAPI's full-stack template does the same)."""
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def reconcile_policy(settings: Settings) -> ReconcilePolicy:
    return ReconcilePolicy(
        requeue_after_s=settings.requeue_after_s, lost_after_s=settings.lost_after_s,
        default_queue=settings.default_queue,
        lease=LeasePolicy(lease_seconds=settings.lease_seconds,
                          max_platform_failures=settings.max_platform_failures,
                          log_cap_bytes=settings.log_cap_bytes,
                          release_backoff_s=settings.release_backoff_s,
                          release_backoff_max_s=settings.release_backoff_max_s))


def make_job_queue(settings: Settings) -> JobQueue:
    """The real queue; a filesystem broker lives in <data_dir>/broker, shared with the worker."""
    return CeleryJobQueue(settings.broker_url, settings.data_dir / "broker")


def _lifespan(app: FastAPI) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        settings: Settings = app.state.settings
        if settings.auto_migrate:
            upgrade_database(settings.database_url)
        app.state.storage.sweep_stale_tmp()
        warm = getattr(app.state.queue, "warm", None)
        if warm is not None:  # in the background: a broker that is down must not block start-up
            threading.Thread(target=warm, name="arena-queue-warm", daemon=True).start()
        if settings.admin_bootstrap_token:
            with app.state.db.session(write=True) as session:
                bootstrap_admin(session, settings.admin_bootstrap_token, utcnow(),
                                settings.admin_bootstrap_username)
        stop = threading.Event()
        if settings.reconcile_interval_s > 0:
            threading.Thread(
                target=run_reconciler_forever, name="arena-reconciler", daemon=True,
                args=(app.state.db, app.state.queue, reconcile_policy(settings),
                      settings.reconcile_interval_s, stop)).start()
        try:
            yield
        finally:
            stop.set()
            app.state.db.engine.dispose()

    return lifespan


def create_app(settings: Settings | None = None, *, queue: JobQueue | None = None,
               clock: Callable[[], datetime] = utcnow) -> FastAPI:
    """Build the FastAPI app for `settings` (default: from ARENA_* environment variables)."""
    from server.api import (
        accounts,
        admin,
        auth,
        bundles,
        competitions,
        datasets,
        factsheets,
        internal,
        kits,
        leaderboard,
        participation,
        phase_operations,
        pools,
        submission_operations,
        submissions,
        teams,
    )

    settings = settings or Settings()
    if settings.secret_problems() and not settings.insecure_dev_secrets:
        # `arena serve` refuses these; an app built otherwise (tests, benchmarks) is told loudly.
        log.warning("arena.secrets.insecure problems=%s", settings.secret_problems())
    app = FastAPI(title="MetaDL Arena", version="0.1.0",
                  description="Code-submission competitions in few-shot image classification.",
                  docs_url=None, redoc_url=None,  # server/web/api_docs.py serves them offline
                  generate_unique_id_function=operation_id)
    app.router.lifespan_context = _lifespan(app)
    app.state.settings = settings
    app.state.db = make_database(settings.database_url, settings.db_pool())
    app.add_middleware(AdmissionMiddleware, limit=settings.request_concurrency,
                       max_waiting=settings.request_max_waiting,
                       max_wait_s=settings.request_max_wait_s,
                       internal_limit=settings.internal_request_concurrency)
    if settings.session_cookie_secure:  # served over HTTPS: outermost, on every answer
        app.add_middleware(HstsMiddleware)
    app.add_middleware(BodyBoundsMiddleware, limit=settings.max_json_body_bytes,  # outside it
                       bundle_limit=settings.max_bundle_bytes,
                       internal_limit=settings.max_internal_body_bytes)
    app.state.upload_gate = UploadGate(settings.max_concurrent_uploads,
                                       settings.max_uploads_per_user,
                                       settings.upload_retry_after_s)
    app.state.storage = Storage(settings.storage)
    # Runs of pool phases never reach the broker (issue 37): every enqueue passes this filter.
    app.state.queue = PoolAwareQueue(queue or make_job_queue(settings), app.state.db)
    app.state.clock = clock
    settings.storage.mkdir(parents=True, exist_ok=True)
    install_error_handlers(app)
    install_page_errors(app)
    install_outage_pages(app)
    from server.web import accounts as account_pages
    from server.web import factsheets as factsheet_pages
    from server.web import joining, site
    from server.web import participants as participant_forms
    from server.web import teams as team_pages

    for module in (auth, accounts, account_pages, competitions, bundles, phase_operations,
                   submission_operations, admin, datasets, submissions, leaderboard, internal,
                   participation, participant_forms, joining, teams, team_pages, factsheets,
                   factsheet_pages, kits, pools, site):
        app.include_router(module.router)
    return app


def reconcile_once(settings: Settings, queue: JobQueue | None = None) -> ReconcileReport:
    """One reconciler pass outside the server process (for the CLI or a cron job)."""
    from server.services.reconcile import reconcile

    db = make_database(settings.database_url)
    try:
        with db.session(write=True) as session:
            return reconcile(session, utcnow(), queue or make_job_queue(settings),
                             reconcile_policy(settings))
    finally:
        db.engine.dispose()


OUTAGE_ERRORS = (PoolTimeoutError, OperationalError, InterfaceError, DatabaseUnavailableError)
_JsonHandler = Callable[[Request, Exception], Awaitable[Response]]


def install_outage_pages(app: FastAPI) -> None:
    """A browser asking for a page while the database is down gets an HTML 503 page (with the
    same Retry-After), not the API's JSON body (issue 36); API clients keep the JSON. The page
    is rendered without a user: looking one up would wait on the database that is down."""
    # install_error_handlers registered these: async, answering a Response
    json_handlers = {cls: cast(_JsonHandler, app.exception_handlers[cls]) for cls in OUTAGE_ERRORS}

    def handler_for(exc: Exception) -> _JsonHandler:
        return next(json_handlers[cls] for cls in type(exc).__mro__ if cls in json_handlers)

    async def handle(request: Request, exc: Exception) -> Response:
        response = await handler_for(exc)(request, exc)
        if response.status_code != 503 or not wants_html(request):
            return response
        page = render(request, "error.html", None, app.state.settings, status=503,
                      code="database.unavailable",
                      message="The site's database is unavailable for a moment (restarting or "
                              "overloaded); nothing was changed. Reload this page shortly.")
        if "retry-after" in response.headers:
            page.headers["Retry-After"] = response.headers["retry-after"]
        return page

    for cls in OUTAGE_ERRORS:
        app.add_exception_handler(cls, handle)
