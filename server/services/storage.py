"""Where files live under the storage folder, and streaming writes with a size cap.

Submissions are stored by content hash (`submissions/<sha256>.zip`), datasets by content hash
(`datasets/<hash>/`). Uploads land in `tmp/` first and are moved into place with an atomic
rename, so a half-written file is never visible under its final name.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.orm import Session

from server.core.errors import UploadTooLargeError


@dataclass(frozen=True)
class Storage:
    root: Path

    def tmp_path(self, suffix: str = ".part") -> Path:
        folder = self.root / "tmp"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{uuid.uuid4().hex}{suffix}"

    def sweep_stale_tmp(self, older_than_s: float = 6 * 3600) -> int:
        """Remove partial uploads a killed server left behind. Only old ones: another server
        process sharing this storage may be streaming an upload right now."""
        folder, removed = self.root / "tmp", 0
        cutoff = time.time() - older_than_s
        for item in folder.glob("*") if folder.is_dir() else []:
            try:
                if item.is_file() and item.stat().st_mtime < cutoff:
                    item.unlink()
                    removed += 1
            except FileNotFoundError:  # finished or swept by another process meanwhile
                continue
        return removed

    def submission_path(self, sha256: str) -> Path:
        return self.root / "submissions" / f"{sha256}.zip"

    def dataset_dir(self, content_hash: str) -> Path:
        return self.root / "datasets" / content_hash

    def dataset_tar(self, content_hash: str) -> Path:
        return self.root / "datasets" / f"{content_hash}.tar"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def absolute(self, stored: str) -> Path:
        return self.root / stored


class StreamingFile:
    """A temp file written chunk by chunk with a running sha256 and a size cap."""

    def __init__(self, path: Path, max_bytes: int, what: str = "upload") -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.what = what
        self.size = 0
        self._sha = hashlib.sha256()
        self._fh = open(path, "wb")  # noqa: SIM115 - closed in finish()/discard()

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.discard()
            raise UploadTooLargeError(
                f"the {self.what} exceeds {self.max_bytes} bytes (received more than that); "
                "expected a smaller file — leave data and large checkpoints out of it",
                max_bytes=self.max_bytes,
            )
        self._sha.update(chunk)
        self._fh.write(chunk)

    def finish(self) -> str:
        """Flush to disk and return the sha256 hex."""
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        return self._sha.hexdigest()

    def discard(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self.path.unlink(missing_ok=True)


def place_by_hash(tmp: Path, final: Path) -> bool:
    """Move `tmp` to `final` unless `final` already exists; True if we created it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(tmp, final)  # fails if final exists: never overwrite a stored file
        created = True
    except FileExistsError:
        created = False
    tmp.unlink(missing_ok=True)
    return created


def lock_content(session: Session, sha256: str) -> None:
    """Hold a lock on one stored content hash until `session`'s transaction ends.

    Every transaction that adds a reference to a content-addressed file places the file under
    this lock, and the one that decides to delete an unreferenced file decides under it too, so
    a refused upload never deletes the file a concurrent accepted one (same bytes) is about to
    commit a row for (D7: 17 of 60 trials lost the zip). Postgres: a transaction-scoped
    advisory lock keyed by the hash; SQLite: write transactions (BEGIN IMMEDIATE) already
    exclude each other.
    """
    if session.get_bind().dialect.name == "postgresql":
        key = int(sha256[:15], 16)  # 60 bits: fits the signed bigint the lock takes
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
