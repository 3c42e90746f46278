"""An in-process app on a throwaway SQLite database with a RecordingJobQueue, and seeded actors.

Shared by the fuzz, authorization and load suites (their conftests put this folder on sys.path).
Everything goes through the real routes, dependencies and services; only the broker is a fake.
"""

from __future__ import annotations

import io
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fastapi.testclient import TestClient
from job_queue_fake import RecordingJobQueue

from server.app import create_app
from server.core.config import Settings
from server.core.db import Database

MODEL = b"class MyMetaLearner: ...\nclass MyLearner: ...\n"


@dataclass
class InProcess:
    client: TestClient
    db: Database
    queue: RecordingJobQueue
    settings: Settings
    admin: dict[str, str] = field(default_factory=dict)

    def token_for(self, username: str, role: str = "participant") -> dict[str, str]:
        """Create a user through the API (as admin); returns its bearer header."""
        answer = self.client.post("/api/v1/users", headers=self.admin,
                                  json={"username": username, "role": role})
        assert answer.status_code == 201, answer.text
        return {"Authorization": f"Bearer {answer.json()['token']}"}

    def competition(self, organizer: dict[str, str], **phase) -> dict:
        """A competition with one open phase owned by `organizer`; returns the created body."""
        fields = {"name": "dev", "status": "open", "protocol": {"name": "fixed"}, **phase}
        body = {"slug": f"c-{uuid.uuid4().hex[:8]}", "title": "C", "phases": [fields]}
        answer = self.client.post("/api/v1/competitions", headers=organizer, json=body)
        assert answer.status_code == 201, answer.text
        return answer.json()

    def upload(self, phase_id: int, headers: dict, data: bytes, name: str = "s.zip"):
        return self.client.post(f"/api/v1/phases/{phase_id}/submissions", headers=headers,
                                files={"file": (name, data, "application/zip")})


@contextmanager
def inprocess_app(root: Path, database_url: str | None = None, **overrides) -> Iterator[InProcess]:
    """Start the app (migrations, admin bootstrap) on `database_url` or a SQLite file."""
    admin_token = f"admin-{uuid.uuid4().hex}"
    settings = Settings(data_dir=root, database_url=database_url or "",
                        reconcile_interval_s=0, admin_bootstrap_token=admin_token, **overrides)
    queue = RecordingJobQueue()
    app = create_app(settings, queue=queue)
    with TestClient(app) as client:
        yield InProcess(client=client, db=app.state.db, queue=queue, settings=settings,
                        admin={"Authorization": f"Bearer {admin_token}"})


@contextmanager
def cheap_password_hashing() -> Iterator[None]:
    """argon2 at its smallest cost while the block runs, for suites that check who may do what
    rather than how passwords are hashed (the authorization matrices sign people up and change
    passwords on every world: at the real cost, 64 MiB and 3 passes, each hash was ~0.23 s of
    CPU, most of tests/authz/test_authz_accounts.py's). Hashes are still argon2id, checked as
    before; the real parameters are what tests/integration/server/test_accounts.py and
    test_login_throttle.py see. The login's dummy hash is cached: it is dropped on the way in
    and out, so no test outside the block meets one of the cheap parameters."""
    from argon2 import PasswordHasher

    from server.core import security
    from server.services import passwords

    real = security._hasher
    security._hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
    passwords._dummy_hash.cache_clear()
    try:
        yield
    finally:
        security._hasher = real
        passwords._dummy_hash.cache_clear()


def zip_bytes(entries: list[tuple[str, bytes]] | None = None,
              compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in entries if entries is not None else [("model.py", MODEL)]:
            zf.writestr(name, data)
    return buf.getvalue()
