"""Helpers shared by the server integration tests (importable by name, unlike conftest)."""

from __future__ import annotations

import io
import uuid
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from job_queue_fake import RecordingJobQueue

from server.core.config import Settings
from server.core.db import Database
from server.models import Competition, Phase, User
from server.services.users import issue_token

MODEL = b"class MyMetaLearner: ...\nclass MyLearner: ...\n"


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2030, 1, 15, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw) -> None:
        self.now += timedelta(**kw)


@dataclass
class Env:
    """A running app with its collaborators, and helpers to seed data."""

    client: TestClient
    db: Database
    queue: RecordingJobQueue
    clock: Clock
    settings: Settings

    def user(self, username: str, role: str = "participant") -> tuple[User, dict[str, str]]:
        with self.db.session() as s:
            user = User(username=username, role=role, created_at=self.clock.now)
            s.add(user)
            s.flush()
            token = issue_token(s, user, now=self.clock.now)
        return user, {"Authorization": f"Bearer {token}"}

    def phase(self, owner: User | None = None, **fields) -> Phase:
        """An open phase in a new competition (organized by `owner` when given)."""
        values = {"name": "dev", "status": "open", "runs_per_submission": 1} | fields
        with self.db.session() as s:
            comp = Competition(slug=f"c-{uuid.uuid4().hex[:8]}", title="C",
                               owner_id=owner.id if owner else None, created_at=self.clock.now)
            s.add(comp)
            s.flush()
            phase = Phase(competition_id=comp.id, created_at=self.clock.now, **values)
            s.add(phase)
        return phase

    def submit(self, phase_id: int, headers: dict, data: bytes | None = None):
        data = zip_bytes() if data is None else data
        return self.client.post(f"/api/v1/phases/{phase_id}/submissions", headers=headers,
                                files={"file": ("s.zip", data, "application/zip")})


def zip_bytes(entries: list[tuple[str, bytes]] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries or [("model.py", MODEL)]:
            zf.writestr(name, data)
    return buf.getvalue()
