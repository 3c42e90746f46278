"""Registering compiled datasets (cache entries) and serving them to workers as tars.

An entry arrives as a tar (any organizer) or as a folder already on the server (admins only:
it reads server files). It is checked — regular files and folders only, no links, no absolute or
`..` paths, a `manifest.json` naming its content hash, and that hash recomputed from the pixels,
labels and class names (a manifest can claim any hash) — and stored once, as the tar workers
fetch (`datasets/<content_hash>.tar`; never a folder beside it). Registering the same content
again returns the existing row.

Who may use a dataset in a phase: admins any; an organizer one that an admin registered or
that they registered themselves (a `DatasetGrant`, written only after the hash was verified:
proving you hold the content is what earns its use — knowing its hash is not enough).
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import InvalidInputError
from server.models import AuditLog, Dataset, DatasetGrant, User
from server.services.storage import Storage
from submission_api.data.compiled import CompiledDataError, open_compiled, verify_compiled
from submission_api.safe_tar import extract_tar

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
    if not folder.is_dir() or not any(folder.iterdir()):  # a tar of nothing unpacks to nothing
        raise _bad("the tar holds no file; expected a compiled cache entry "
                   "(<content_hash>/manifest.json, images.u8, labels.npy): `tar -cf entry.tar "
                   "-C ~/.cache/metadl-arena <content_hash>` after `arena data compile`")
    if (folder / MANIFEST).is_file():
        return folder
    children = [p for p in folder.iterdir() if p.is_dir()]
    if len(children) == 1 and (children[0] / MANIFEST).is_file():
        return children[0]
    raise _bad(f"no {MANIFEST} at the top of the entry or in its single folder; expected a "
               "compiled cache entry (<content_hash>/manifest.json, images.u8, labels.npy)")


def _read_manifest(root: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((root / MANIFEST).read_text())
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
                extract_tar(tar, staging)
        except tarfile.TarError as exc:
            raise _bad(f"the upload is not a readable tar ({exc}); send `tar -cf` of the "
                       "entry folder") from exc
        return _store_entry(session, storage, _entry_root(staging), actor, now)
    finally:
        tar_path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)


def register_from_path(session: Session, storage: Storage, path: Path, actor: User,
                       now: datetime) -> Dataset:
    """Copy a compiled entry that is already on the server (admin only; checked by caller)."""
    if not path.is_dir():
        raise _bad(f"{path} is not a folder on the server; expected a compiled entry folder")
    row = _store_entry(session, storage, _entry_root(path), actor, now)
    session.commit()
    return row


def check_content_hash(root: Path, content_hash: str) -> None:
    """Recompute the entry's hash; raise InvalidInputError unless it is `content_hash`."""
    try:
        same = verify_compiled(open_compiled(root))
    except (CompiledDataError, OSError, ValueError) as exc:
        raise _bad(f"the entry is not a readable compiled dataset ({exc}); compile it with "
                   "`arena data compile` and send the entry folder") from exc
    if not same:
        raise _bad(f"the entry's content does not hash to the {content_hash} its manifest "
                   "claims; recompile it (`arena data compile`) instead of editing it")


def _store_entry(session: Session, storage: Storage, root: Path, actor: User,
                 now: datetime) -> Dataset:
    manifest = _read_manifest(root)
    content_hash = str(manifest["content_hash"])
    check_content_hash(root, content_hash)
    existing = session.execute(
        select(Dataset).where(Dataset.content_hash == content_hash)).scalar_one_or_none()
    if existing is not None:
        grant_dataset(session, existing, actor, now)
        return existing
    final = storage.dataset_tar(content_hash)
    if not final.exists():
        _write_tar(root, final, storage.tmp_path(suffix=".tar"))
    row = Dataset(content_hash=content_hash, name=str(manifest["name"]),
                  storage_path=storage.relative(final), size_bytes=final.stat().st_size,
                  n_images=int(manifest.get("n_images", 0)),
                  n_classes=len(manifest.get("class_names", [])) or int(
                      manifest.get("n_classes", 0)),
                  created_by=actor.id, created_at=now)
    session.add(row)
    session.add(AuditLog(actor_id=actor.id, action="dataset.register",
                         target=f"dataset:{content_hash}", details={"name": row.name}, at=now))
    session.flush()
    grant_dataset(session, row, actor, now)
    return row


def grant_dataset(session: Session, row: Dataset, user: User, now: datetime) -> None:
    """Let `user` use `row` in their phases (idempotent)."""
    held = session.execute(select(DatasetGrant.id).where(
        DatasetGrant.dataset_id == row.id, DatasetGrant.user_id == user.id)).first()
    if held is None:
        session.add(DatasetGrant(dataset_id=row.id, user_id=user.id, granted_at=now))
        session.flush()


def usable_hashes(session: Session, user: User, hashes: list[str] | set[str]) -> set[str]:
    """Which of `hashes` are registered and usable by `user` (see the module docstring)."""
    query = select(Dataset.content_hash).where(Dataset.content_hash.in_(list(hashes)))
    if user.role != "admin":
        granted = select(DatasetGrant.dataset_id).where(DatasetGrant.user_id == user.id)
        by_admin = select(User.id).where(User.role == "admin")
        query = query.where(Dataset.id.in_(granted) | Dataset.created_by.in_(by_admin))
    return set(session.execute(query).scalars())


def visible_datasets(session: Session, user: User) -> list[Dataset]:
    """The datasets `user` may use, oldest first (all of them for admins)."""
    query = select(Dataset).order_by(Dataset.id)
    if user.role != "admin":
        granted = select(DatasetGrant.dataset_id).where(DatasetGrant.user_id == user.id)
        by_admin = select(User.id).where(User.role == "admin")
        query = query.where(Dataset.id.in_(granted) | Dataset.created_by.in_(by_admin))
    return list(session.execute(query).scalars())


def _write_tar(folder: Path, final: Path, tmp: Path) -> None:
    """Tar `folder` (files at the top) to `final`, atomically."""
    with tarfile.open(tmp, "w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, final)


def dataset_tar(storage: Storage, row: Dataset) -> Path:
    """The stored tar of an entry. An entry stored as a folder by an earlier version is tarred
    once and its folder removed, so that no dataset is kept twice."""
    tar_path = storage.dataset_tar(row.content_hash)
    if tar_path.exists():
        return tar_path
    folder = storage.absolute(row.storage_path)
    _write_tar(folder, tar_path, storage.tmp_path(suffix=".tar"))
    shutil.rmtree(folder, ignore_errors=True)
    return tar_path
