"""Competition bundles: create or update a whole competition from its YAML, and read it back.

The body is either JSON `{"yaml": text, "resolved": {...}}` (what `arena competition create`
sends after compiling and registering local collections) or the YAML text itself.
Validation errors answer 422 `bundle.invalid` with every problem and its line.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from server.api.competitions import competition_out, find_competition
from server.api.deps import (
    NowDep,
    Organizer,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    get_queue,
)
from server.bundles import parse_bundle
from server.core.errors import BodyTooLargeError, InvalidInputError, NotFoundError
from server.schemas.competition import CompetitionOut
from server.schemas.operations import BundleRequest
from server.services import bundles as service
from server.services.competitions import get_owned_competition
from server.services.queue import JobQueue, enqueue_quietly

DEFAULT_MAX_BUNDLE_BYTES = 1024**2
router = APIRouter(prefix="/api/v1", tags=["bundles"])
_BODY = {"requestBody": {"content": {
    "application/json": {"schema": BundleRequest.model_json_schema()},
    "application/yaml": {"schema": {"type": "string"}}}}}


async def read_body_capped(request: Request, max_bytes: int, what: str) -> bytes:
    """The request body, refused with 413 once it passes `max_bytes` (never read whole)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLargeError(f"the {what} declares {declared} bytes; at most {max_bytes} "
                                "are accepted — split it or leave generated content out",
                                max_bytes=max_bytes)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise BodyTooLargeError(f"the {what} is over {max_bytes} bytes; at most "
                                    f"{max_bytes} are accepted — split it or leave generated "
                                    "content out", max_bytes=max_bytes)
    return bytes(body)


async def read_bundle(request: Request) -> BundleRequest:
    settings = getattr(request.app.state, "settings", None)
    max_bytes = getattr(settings, "max_bundle_bytes", DEFAULT_MAX_BUNDLE_BYTES)
    raw = await read_body_capped(request, max_bytes, "bundle")
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            return BundleRequest.model_validate(json.loads(raw))
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting past the parser
            raise InvalidInputError(f"the JSON body is not {{'yaml': str, 'resolved': {{}}}} "
                                    f"({exc}); send the YAML text or that object",
                                    code="bundle.invalid") from exc
    try:
        return BundleRequest(yaml=raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInputError("the bundle is not UTF-8 text; save the YAML as UTF-8",
                                code="bundle.invalid") from exc


@router.post("/competitions/bundle", response_model=CompetitionOut, status_code=201,
             openapi_extra=_BODY)
async def create_from_bundle(request: Request, user: Organizer, session: WriteSessionDep,
                             now: NowDep) -> CompetitionOut:
    """Create a competition, its pages, leagues and phases from a bundle."""
    body = await read_bundle(request)

    def work() -> CompetitionOut:
        parsed = parse_bundle(body.yaml, body.resolved)
        comp = service.create_from_bundle(session, parsed, body.yaml, user, now)
        return competition_out(comp, user)

    return await run_in_threadpool(work)


@router.put("/competitions/{ref}/bundle", response_model=CompetitionOut, openapi_extra=_BODY)
async def update_from_bundle(
        ref: str, request: Request, user: Organizer, session: WriteSessionDep, now: NowDep,
        settings: SettingsDep, queue: Annotated[JobQueue, Depends(get_queue)],
        on_scored: Annotated[str | None, Query(description=(
            "when the update changes what a phase with scored entries measures (datasets, "
            "seed, protocol): 'rerun' re-runs every entry on the new settings, 'new_phase' "
            "keeps the scored phase closed as '<name> (v<k>)' and opens a new one; without "
            "it such an update is refused (409 bundle.scored_phase_changed)"))] = None,
) -> CompetitionOut:
    """Apply a bundle to the competition `ref` (id or slug) that you organize."""
    body = await read_bundle(request)

    def work() -> CompetitionOut:
        comp = get_owned_competition(session, find_competition(session, ref, user).id, user)
        parsed = parse_bundle(body.yaml, body.resolved)
        jobs = service.update_from_bundle(session, comp, parsed, body.yaml, user, now,
                                          on_scored, settings.default_queue)
        enqueue_quietly(queue, jobs)  # the service committed: a worker never sees an unwritten run
        session.refresh(comp)
        return competition_out(comp, user)

    return await run_in_threadpool(work)


@router.post("/competitions/{ref}/bundle/diff", openapi_extra=_BODY)
async def preview_bundle_update(ref: str, request: Request, user: Organizer,
                                session: SessionDep) -> dict[str, Any]:
    """A dry run of `PUT /competitions/{ref}/bundle`: the same checks, nothing written;
    answers `{"changes": [{phase, field, old, new, text}], "added_phases": [...], "scored":
    [{phase, fields, entries, submission_ids, text}]}` — `scored`: the phases whose scores the
    update would change the meaning of, which it refuses without `on_scored`."""
    body = await read_bundle(request)

    def work() -> dict[str, Any]:
        comp = get_owned_competition(session, find_competition(session, ref, user).id, user)
        parsed = parse_bundle(body.yaml, body.resolved)
        return service.preview_update(session, comp, parsed, user)

    return await run_in_threadpool(work)


@router.get("/competitions/{ref}/bundle", response_class=PlainTextResponse)
def get_bundle(ref: str, user: Organizer, session: SessionDep) -> PlainTextResponse:
    """The YAML the competition was last built from (organizers of it only)."""
    comp = get_owned_competition(session, find_competition(session, ref, user).id, user)
    if not comp.bundle:
        raise NotFoundError(f"competition {comp.slug!r} was not built from a bundle")
    return PlainTextResponse(comp.bundle, media_type="application/yaml")
