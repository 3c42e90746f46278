"""One upload, from its request to a registered submission: the JSON route
(`api/submissions.py`) and the web form (`web/submit_pages.py`) both call `receive_submission`,
so the two cannot drift apart (issue 35, D5).

The body streams to a temp file holding no database connection (core/multipart.py); the form's
text fields are checked next (the caller's own check first, e.g. the web form's CSRF token, then
the method's), and a refused upload's temp file is removed before anything is registered; then
`accept_submission` registers it with its method in one transaction (a failure there leaves
nothing half-made: no submission without its method) and enqueues it. Kept apart
from services/upload.py because core/multipart.py imports that module.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from server.core.config import Settings
from server.core.db import Database
from server.core.multipart import receive_file
from server.models import Submission
from server.services.methods import check_method
from server.services.queue import JobQueue
from server.services.storage import Storage
from server.services.upload import accept_submission, zip_limits

FieldCheck = Callable[[dict[str, str]], None]
"""Checks an upload's text fields before anything is registered; raises to refuse it."""


def no_field_check(fields: dict[str, str]) -> None:
    """The JSON route's check: none beyond the method's (its caller is authenticated by a
    bearer token, which a cross-site form cannot send)."""


async def receive_submission(request: Request, *, user_id: int, phase_id: int,
                             settings: Settings, db: Database, storage: Storage,
                             queue: JobQueue, now: datetime,
                             check_fields: FieldCheck = no_field_check) -> Submission:
    """Stream, check the fields (`check_fields`, then the method's), register with the method
    in one transaction, and enqueue. Raises what the checks raise (InvalidInputError,
    CsrfError, ...) and what `accept_submission` raises; a refused or failed upload leaves no
    temp file and registers nothing."""
    staged, fields = await receive_file(request, storage, settings.max_upload_bytes,
                                        owner=user_id)
    try:
        check_fields(fields)
        method = check_method(fields)
    except BaseException:
        staged.path.unlink(missing_ok=True)
        raise
    submission = await run_in_threadpool(
        accept_submission, db, storage, queue, user_id=user_id, phase_id=phase_id,
        staged=staged, now=now, limits=zip_limits(settings),
        default_queue=settings.default_queue, note=fields.get("note", ""),
        league=fields.get("league") or None, method=method)
    return submission
