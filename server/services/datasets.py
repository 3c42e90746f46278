"""Registering compiled datasets (cache entries) and serving them to workers as tars.

An entry arrives as a tar (any organizer) or as a folder already on the server (admins only:
it reads server files). It is checked — regular files and folders only, no links, no absolute or
`..` paths, a `manifest.json` naming its content hash — and stored once under
`datasets/<content_hash>/`. Registering the same hash again returns the existing row.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from datetime import datetime
from pathlib import Path, PurePosixPath

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import InvalidInputError
from server.models import AuditLog, Dataset, User
from server.services.storage import Storage

MANIFEST = "manifest.json"


def _bad(message: str) -> InvalidInputError:
    return InvalidInputError(message, code="dataset.invalid")


def _check_tar_members(tar: tarfile.TarFile) -> None:
    for member in tar.getmembers():
        parts = PurePosixPath(member.name).parts
        if member.name.startswith("/") or ".." in parts:
            raise _bad(f"tar entry {member.name!r} leaves the entry folder; expected relative "
                       "paths inside the compiled entry")
        if not (member.isfile() or member.isdir()):
            raise _bad(f"tar entry {member.name!r} is a link or special file; expected regular "
                       "files only (tar the entry with --dereference)")


def _entry_root(folder: Path) -> Path:
    """The folder holding manifest.json: `folder` itself or its single subfolder."""
    if (folder / MANIFEST).is_file():
        return folder
    children = [p for p in folder.iterdir() if p.is_dir()]
    if len(children) == 1 and (children[0] / MANIFEST).is_file():
        return children[0]
    raise _bad(f"no {MANIFEST} at the top of the entry or in its single folder; expected a "
               "compiled cache entry (<content_hash>/manifest.json, images.u8, labels.npy)")


def _read_manifest(root: Path) -> dict:
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        str(manifest["content_hash"])
        str(manifest["name"])
    except (ValueError, KeyError, TypeError) as exc:
        raise _bad(f"{MANIFEST} is unreadable or lacks 'content_hash'/'name' ({exc})") from exc
    content_hash = str(manifest["content_hash"])
    if not content_hash.isalnum() or len(content_hash) > 64:
        raise _bad(f"content_hash {content_hash!r} is not a hex digest")
    return manifest


def register_from_tar(session: Session, storage: Storage, tar_path: Path, actor: User,
                      now: datetime) -> Dataset:
    """Check and unpack an uploaded tar of a compiled entry, then store it by hash."""
    staging = storage.tmp_path(suffix=".d")
    try:
        try:
            with tarfile.open(tar_path) as tar:
                _check_tar_members(tar)
                tar.extractall(staging, filter="data")
        except tarfile.TarError as exc:
            raise _bad(f"the upload is not a readable tar ({exc}); send `tar -cf` of the "
                       "entry folder") from exc
        return _store_entry(session, storage, _entry_root(staging), actor, now, move=True)
    finally:
        tar_path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)


def register_from_path(session: Session, storage: Storage, path: Path, actor: User,
                       now: datetime) -> Dataset:
    """Copy a compiled entry that is already on the server (admin only; checked by caller)."""
    if not path.is_dir():
        raise _bad(f"{path} is not a folder on the server; expected a compiled entry folder")
    return _store_entry(session, storage, _entry_root(path), actor, now, move=False)


def _store_entry(session: Session, storage: Storage, root: Path, actor: User, now: datetime,
                 move: bool) -> Dataset:
    manifest = _read_manifest(root)
    content_hash = str(manifest["content_hash"])
    existing = session.execute(
        select(Dataset).where(Dataset.content_hash == content_hash)).scalar_one_or_none()
    if existing is not None:
        return existing
    final = storage.dataset_dir(content_hash)
    if not final.exists():
        staged = storage.tmp_path(suffix=".entry")
        (shutil.move if move else shutil.copytree)(str(root), str(staged))
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, final)
    size = sum(p.stat().st_size for p in final.rglob("*") if p.is_file())
    row = Dataset(content_hash=content_hash, name=str(manifest["name"]),
                  storage_path=storage.relative(final), size_bytes=size,
                  n_images=int(manifest.get("n_images", 0)),
                  n_classes=len(manifest.get("class_names", [])) or int(
                      manifest.get("n_classes", 0)),
                  created_by=actor.id, created_at=now)
    session.add(row)
    session.add(AuditLog(actor_id=actor.id, action="dataset.register",
                         target=f"dataset:{content_hash}", details={"name": row.name}, at=now))
    session.flush()
    return row


def dataset_tar(storage: Storage, row: Dataset) -> Path:
    """A tar of the stored entry (files at the top), built once and then reused."""
    tar_path = storage.dataset_tar(row.content_hash)
    if tar_path.exists():
        return tar_path
    folder = storage.absolute(row.storage_path)
    tmp = storage.tmp_path(suffix=".tar")
    with tarfile.open(tmp, "w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    os.replace(tmp, tar_path)
    return tar_path
