"""Downloads of a competition's starting kit and sample data, and the organizer's upload of
the files its bundle's `kit:` section names (`services.kits`; issue 32.4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from server.api.competitions import competition_out, find_competition
from server.api.deps import (
    BriefOrganizer,
    NowDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    get_db,
    get_storage,
)
from server.core.db import Database
from server.core.errors import ForbiddenError, NotFoundError
from server.core.multipart import receive_file
from server.services import kits
from server.services.storage import Storage
from server.services.tenancy import organizes_competition

router = APIRouter(tags=["kits"])
StorageDep = Annotated[Storage, Depends(get_storage)]
ZIP = "application/zip"
VOLATILE = {"countdown_s", "accepting_submissions", "status"}
"""Phase fields that change with the clock: left out of the kit's phase files (the kit is
built once per content), which carry what `arena run --protocol-file` reads."""


@router.get("/kit/starting_kit.zip", response_class=FileResponse)
async def starting_kit_zip(storage: StorageDep) -> FileResponse:
    """The starting kit of no competition in particular: `pip install ./arena-kit`."""
    path = await run_in_threadpool(kits.starting_kit_path, storage, None, {})
    return FileResponse(path, media_type=ZIP, filename="starting_kit.zip")


@router.get("/competitions/{competition_id}/kit/starting_kit.zip",
            response_class=FileResponse)
async def competition_kit_zip(competition_id: int, session: SessionDep, user: OptionalUser,
                              storage: StorageDep, now: NowDep) -> FileResponse:
    """The starting kit with the competition's files and its phases' published protocols
    (`competition/phases/<name>.json`, for `arena run --protocol-file`)."""
    comp = find_competition(session, str(competition_id), user)
    phases = {kits.phase_file_name(p.name): p.model_dump(mode="json", exclude=VOLATILE)
              for p in competition_out(comp, user, now).phases}
    path = await run_in_threadpool(kits.starting_kit_path, storage, comp.id, phases)
    return FileResponse(path, media_type=ZIP, filename="starting_kit.zip")


@router.get("/competitions/{competition_id}/kit/sample_data.tar", response_class=FileResponse)
def sample_data_tar(competition_id: int, session: SessionDep, user: OptionalUser,
                    storage: StorageDep) -> FileResponse:
    """The competition's sample data: a Meta-Album collection, `tar -xf` into a folder."""
    comp = find_competition(session, str(competition_id), user)
    path = kits.kit_path(storage, comp.id, "sample_data.tar")
    if not path.is_file():
        raise NotFoundError(f"competition {comp.id} serves no sample data; make a collection in "
                            "the same format with `arena data generate sample_data`")
    return FileResponse(path, media_type="application/x-tar", filename="sample_data.tar")


@router.post("/api/v1/competitions/{competition_id}/kit/{name}", status_code=201)
async def upload_kit_file(competition_id: int, name: str, request: Request,
                          user: BriefOrganizer, storage: StorageDep, settings: SettingsDep,
                          db: Annotated[Database, Depends(get_db)]) -> dict[str, object]:
    """Store one of the competition's kit files (`sample_data.tar` or `files.zip`) sent in the
    multipart field 'file'; `arena competition create|update` sends the bundle's `kit:`."""
    def check() -> None:
        with db.session() as session:
            comp = find_competition(session, str(competition_id), user)
            if not organizes_competition(user, comp):
                raise ForbiddenError(f"you do not organize competition {competition_id}")
        kits.kit_path(storage, competition_id, name)

    await run_in_threadpool(check)
    staged, _ = await receive_file(request, storage, settings.max_dataset_upload_bytes,
                                   owner=user.id)
    try:
        size = await run_in_threadpool(kits.store_kit_file, storage, competition_id, name,
                                       staged.path)
    finally:
        staged.path.unlink(missing_ok=True)
    return {"competition_id": competition_id, "name": name, "bytes": size}
