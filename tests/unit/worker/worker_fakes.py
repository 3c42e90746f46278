"""Fakes for the worker pipeline: a recording internal-API client, tiny compiled datasets and
submission zips, and a claimed run that names them. (A uniquely named module, not conftest:
test folders have no __init__.py, so a second `conftest` module name would collide.)"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from submission_api.data.compiled import (
    EntryMeta,
    create_image_file,
    finalize_entry,
    new_staging_dir,
)
from worker.client import ClaimedRun, ServerUnavailableError

RUN_TOKEN = "run-token-1"


def make_compiled_entry(parent: Path, name: str, n_classes: int = 2, per_class: int = 3,
                        fill: int = 0) -> tuple[Path, str]:
    """A real compiled entry (tiny), built with the data package's own writer."""
    staging = new_staging_dir(parent)
    n = n_classes * per_class
    images = create_image_file(staging, n)
    images[:] = (np.arange(n, dtype=np.uint8)[:, None, None, None] + fill)
    images.flush()
    del images
    labels = np.repeat(np.arange(n_classes, dtype=np.int64), per_class)
    meta = EntryMeta(name=name, labels=labels, class_names=tuple(f"c{i}" for i in range(n_classes)))
    content_hash = finalize_entry(staging, meta)
    return staging, content_hash


def tar_entry(entry: Path, top: str | None = None) -> bytes:
    """The bytes of a tar of `entry`'s files, at the root or under folder `top`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for item in sorted(entry.iterdir()):
            archive.add(item, arcname=f"{top}/{item.name}" if top else item.name)
    return buffer.getvalue()


def make_zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@dataclass
class FakeClient:
    """Stands in for `InternalClient`: serves bytes, records every call, answers as told."""

    claimed: ClaimedRun | None = None
    submission: bytes = b""
    datasets: dict[str, bytes] = field(default_factory=dict)
    revoked: bool = False
    """Once set, heartbeats are answered 409 (the run was taken away)."""
    finish_answer: bool = True
    fail_downloads: bool = False
    release_fails: bool = False
    release_details: list[str | None] = field(default_factory=list)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any] | None] = field(default_factory=list)

    def claim(self, run_id: Any, token: str, worker: str) -> ClaimedRun | None:
        self.calls.append(("claim", worker))
        return self.claimed

    def report_unhealthy(self, run_id: Any, token: str, worker: str, reason: str) -> None:
        self.calls.append(("report_unhealthy", reason))

    def heartbeat(self, run_id: Any, token: str, fencing_token: int, stage: str,
                  progress: dict[str, Any] | None = None) -> bool:
        self.calls.append(("heartbeat", stage))
        self.progress.append(progress)
        return not self.revoked

    def finish(self, run_id: Any, token: str, body: dict[str, Any]) -> bool:
        self.calls.append(("finish", body))
        return self.finish_answer

    def release(self, run_id: Any, token: str, fencing_token: int, error: str,
                detail: str | None = None) -> bool:
        self.calls.append(("release", error))
        self.release_details.append(detail)
        if self.release_fails:
            raise ServerUnavailableError("release failed 5 times")
        return True

    def download_submission(self, run_id: Any, token: str, dest: Path) -> None:
        self.calls.append(("download_submission", run_id))
        self._serve(self.submission, dest)

    def download_dataset(self, content_hash: str, token: str, dest: Path) -> None:
        self.calls.append(("download_dataset", content_hash))
        self._serve(self.datasets[content_hash], dest)

    def _serve(self, data: bytes, dest: Path) -> None:
        if self.fail_downloads:
            raise ServerUnavailableError("download failed 5 times")
        dest.write_bytes(data)

    def named(self, kind: str) -> list[Any]:
        return [payload for name, payload in self.calls if name == kind]


def make_claimed(submission: bytes, datasets: list[dict[str, Any]], **overrides: Any) -> ClaimedRun:
    data = {
        "run_id": 7, "fencing_token": 3, "lease_expires_at": datetime(2030, 1, 1, tzinfo=UTC),
        "submission_sha256": hashlib.sha256(submission).hexdigest(),
        "protocol": {"name": "fixed"}, "test_seed": 11, "participant_seed": 2, "time_limit_s": 60,
        "resources": {"cpus": 2, "memory_mb": 1024, "gpus": 0}, "image": "arena/sandbox:cpu",
        "datasets": datasets,
    }
    data.update(overrides)
    return ClaimedRun.model_validate(data)


@dataclass
class PhaseFiles:
    """A submission zip and two compiled datasets, as the server would serve them."""

    submission: bytes
    tars: dict[str, bytes]
    refs: list[dict[str, Any]]
