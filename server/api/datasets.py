"""Dataset registration: organizers upload a tar of a compiled entry; admins may name a
folder already on the server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from server.api.deps import (
    Admin,
    BriefOrganizer,
    NowDep,
    Organizer,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    get_db,
    get_storage,
)
from server.api.paging import PageDep, paged
from server.core.db import Database
from server.core.multipart import receive_file
from server.schemas.competition import DatasetFromPath, DatasetOut
from server.services import datasets as service
from server.services.storage import Storage

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])
StorageDep = Annotated[Storage, Depends(get_storage)]
_TAR_BODY = {"requestBody": {"content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary"}}}}}}}


@router.get("", response_model=list[DatasetOut])
def list_datasets(request: Request, response: Response, user: Organizer, session: SessionDep,
                  page: PageDep) -> list[DatasetOut]:
    """The datasets the caller may use in a phase (their own and the admins'; admins: all),
    `limit` at a time (`Link` names the next page)."""
    return [DatasetOut.model_validate(r)
            for r in paged(request, response, page, service.visible_datasets(session, user))]


@router.post("", response_model=DatasetOut, status_code=201, openapi_extra=_TAR_BODY)
async def upload_dataset(request: Request, user: BriefOrganizer, storage: StorageDep,
                         settings: SettingsDep, now: NowDep,
                         db: Annotated[Database, Depends(get_db)]) -> DatasetOut:
    """Register a compiled cache entry sent as a tar in the multipart field 'file'.

    No database session is held while the tar streams in (it may take minutes)."""
    staged, _ = await receive_file(request, storage, settings.max_dataset_upload_bytes,
                                   owner=user.id)

    def register() -> DatasetOut:
        with db.session(write=True) as session:
            row = service.register_from_tar(session, storage, staged.path, user, now)
            return DatasetOut.model_validate(row)

    return await run_in_threadpool(register)


@router.post("/from-path", response_model=DatasetOut, status_code=201)
def register_local(body: DatasetFromPath, user: Admin, storage: StorageDep,
                   session: WriteSessionDep, now: NowDep) -> DatasetOut:
    """Register a compiled entry folder that already sits on the server (admin only)."""
    row = service.register_from_path(session, storage, Path(body.path), user, now)
    return DatasetOut.model_validate(row)
