"""Fetch step: the submission zip and the phase's compiled datasets, into a content-addressed cache.

Layout: `<cache>/submissions/<sha256>.zip` and `<cache>/datasets/<content_hash>/` (a compiled
entry, see docs/internals.md). Several workers on one host share the cache, so every entry is
built under an exclusive file lock, downloaded to a temporary name, verified against its hash and
renamed into place: a reader never sees half an entry. A cached entry that no longer matches its
hash (disk fault, manual edit) is removed and fetched again; a download that does not match is a
`CacheCorruptError` (the platform's fault, never the participant's). Submission zips are
evicted least recently used first beyond the cache's bounds (worker/cache_eviction.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import tarfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from submission_api.data.compiled import CompiledDataError, open_compiled, verify_compiled
from submission_api.safe_tar import extract_tar
from submission_api.submission_zip import UnsafeZipError, safe_extract
from worker.cache_eviction import evict_submissions
from worker.client import ClaimedRun, DatasetRef, InternalClient
from worker.pipeline.errors import CacheCorruptError, ParticipantFault

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


@contextmanager
def cache_lock(cache_dir: Path, key: str) -> Iterator[None]:
    """Hold an exclusive lock on one cache key, across processes of this host."""
    lock_dir = cache_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{key}.lock").open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def compute_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_submission(client: InternalClient, claimed: ClaimedRun, run_token: str,
                     cache_dir: Path) -> Path:
    """Return the cached submission zip, downloading it when absent or corrupt.

    Raises:
        CacheCorruptError: the downloaded bytes do not hash to `claimed.submission_sha256`.
    """
    sha = claimed.submission_sha256
    folder = cache_dir / "submissions"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{sha}.zip"
    with cache_lock(cache_dir, f"submission-{sha}"):
        if target.is_file() and compute_sha256(target) == sha:
            os.utime(target)  # mtime order is use order, for eviction
            return target
        if target.exists():
            log.warning("run.cache.corrupt", extra={"path": str(target)})
            target.unlink()
        temp = folder / f".tmp-{uuid.uuid4().hex}.zip"
        try:
            client.download_submission(claimed.run_id, run_token, temp)
            got = compute_sha256(temp)
            if got != sha:
                raise CacheCorruptError(f"submission of run {claimed.run_id} hashes to {got}, "
                                        f"expected {sha}; the server's stored copy may be damaged.")
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
    evict_submissions(cache_dir, keep=target)
    return target


def extract_submission(zip_path: Path, dest: Path) -> Path:
    """Safely extract the submission under `dest`; return the folder holding `model.py`.

    Raises:
        ParticipantFault: `invalid_submission` when the zip is unsafe or has no `model.py`.
    """
    try:
        return Path(safe_extract(zip_path, dest))
    except UnsafeZipError as exc:
        raise ParticipantFault("invalid_submission", f"the submission zip was refused: {exc}. "
                               "Zip the contents of your folder with `arena zip`.") from exc


def fetch_datasets(client: InternalClient, claimed: ClaimedRun, run_token: str,
                   cache_dir: Path) -> dict[str, Path]:
    """Fetch every dataset of the phase; returns dataset name -> cached entry folder."""
    return {ref.name: fetch_dataset(client, ref, run_token, cache_dir) for ref in claimed.datasets}


def fetch_dataset(client: InternalClient, ref: DatasetRef, run_token: str, cache_dir: Path) -> Path:
    """Return the cached compiled entry of `ref`, downloading and verifying it when needed.

    Raises:
        CacheCorruptError: the download is not a complete entry hashing to `ref.content_hash`.
    """
    folder = cache_dir / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / ref.content_hash
    with cache_lock(cache_dir, f"dataset-{ref.content_hash}"):
        if entry.is_dir():
            if _entry_matches(entry, ref.content_hash, full=False):
                return entry
            log.warning("run.cache.corrupt", extra={"path": str(entry)})
            shutil.rmtree(entry)
        stem = folder / f".tmp-{uuid.uuid4().hex}"
        tar_path, staging = stem.with_suffix(".tar"), stem
        try:
            client.download_dataset(ref.content_hash, run_token, tar_path)
            root = _unpack_entry(tar_path, staging)
            if not _entry_matches(root, ref.content_hash, full=True):
                raise CacheCorruptError(f"dataset {ref.name!r} from the server does not hash to "
                                        f"{ref.content_hash}; recompile it on the server.")
            os.rename(root, entry)
        finally:
            tar_path.unlink(missing_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
    return entry


def _unpack_entry(tar_path: Path, staging: Path) -> Path:
    """Unpack a dataset tar; the entry may be at the tar's root or in its one top folder."""
    staging.mkdir()
    try:
        with tarfile.open(tar_path) as archive:
            extract_tar(archive, staging)
    except tarfile.TarError as exc:  # OSError (disk full) propagates: a platform fault too
        raise CacheCorruptError(f"dataset tar {tar_path.name} is unreadable: {exc}") from exc
    if (staging / MANIFEST).is_file():
        return staging
    children = [p for p in staging.iterdir() if p.is_dir()]
    if len(children) == 1 and (children[0] / MANIFEST).is_file():
        return children[0]
    raise CacheCorruptError(f"dataset tar {tar_path.name} holds no {MANIFEST} at its root or in "
                            "a single top folder; expected a compiled entry.")


def _entry_matches(root: Path, content_hash: str, *, full: bool) -> bool:
    """Whether `root` opens as a compiled entry with this hash (`full`: recompute it)."""
    try:
        dataset = open_compiled(root)
        if dataset.content_hash != content_hash:
            return False
        return verify_compiled(dataset) if full else True
    except (CompiledDataError, OSError, ValueError, KeyError):
        return False
