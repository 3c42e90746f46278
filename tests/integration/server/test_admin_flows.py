"""Staff flows over HTTP: accounts, password login, competitions, datasets, migrations."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from server.models import Base

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compiled_entries import compiled_entry_tar  # noqa: E402

HASH, _ENTRY_TAR = compiled_entry_tar()


def entry_tar(link: bool = False) -> bytes:
    """A real compiled entry (the server recomputes its hash), optionally with a link in it."""
    if not link:
        return _ENTRY_TAR
    buf = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(_ENTRY_TAR)) as source, \
            tarfile.open(fileobj=buf, mode="w") as tar:
        for member in source.getmembers():
            tar.addfile(member, source.extractfile(member) if member.isfile() else None)
        info = tarfile.TarInfo(f"{HASH}/evil")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    return buf.getvalue()


def test_schema_after_migrations_matches_the_models(env):
    with env.db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_admin_creates_an_organizer_who_logs_in_with_a_password(env):
    _, admin = env.user("root", role="admin")
    made = env.client.post("/api/v1/users", headers=admin, json={
        "username": "olga", "role": "organizer", "password": "s3cret-pass"})
    assert made.status_code == 201, made.text
    token = env.client.post("/api/v1/auth/token",
                            json={"username": "olga", "password": "s3cret-pass"}).json()["token"]
    me = env.client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).json()
    assert me["role"] == "organizer"
    wrong = env.client.post("/api/v1/auth/token", json={"username": "olga", "password": "x"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "auth.bad_credentials"


def test_organizer_cannot_create_an_admin(env):
    _, org = env.user("olga", role="organizer")
    answer = env.client.post("/api/v1/users", headers=org,
                             json={"username": "eve", "role": "admin"})
    assert answer.status_code == 422


def test_dataset_upload_phase_open_and_worker_fetch(env):
    _, org = env.user("olga", role="organizer")
    answer = env.client.post("/api/v1/datasets", headers=org,
                             files={"file": ("d.tar", entry_tar(), "application/x-tar")})
    assert answer.status_code == 201, answer.text
    assert (answer.json()["n_images"], answer.json()["n_classes"]) == (4, 2)
    data = {"collection": "demo", "meta_test": [{"name": "D1", "content_hash": HASH}]}
    comp = env.client.post("/api/v1/competitions", headers=org, json={
        "slug": "demo", "title": "Demo",
        "phases": [{"name": "dev", "status": "open", "data": data}]}).json()
    phase_id = comp["phases"][0]["id"]
    assert env.client.get("/api/v1/phases").json()[0]["id"] == phase_id
    _, ann = env.user("ann")
    env.submit(phase_id, ann)
    run_id, token, _ = env.queue.jobs[-1]
    auth = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                              headers=auth).json()
    assert claimed["dataset_hashes"] == [HASH]
    fetched = env.client.get(f"/internal/datasets/{HASH}", headers=auth)
    assert fetched.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(fetched.content)) as tar:
        assert "manifest.json" in tar.getnames()
    other = env.client.get(f"/internal/datasets/{'cd' * 32}", headers=auth)
    assert other.status_code == 404


def test_opening_a_phase_with_unregistered_datasets_is_refused(env):
    _, org = env.user("olga", role="organizer")
    data = {"meta_test": [{"name": "D1", "content_hash": HASH}]}
    answer = env.client.post("/api/v1/competitions", headers=org, json={
        "slug": "demo", "title": "Demo", "phases": [{"name": "dev", "status": "open",
                                                     "data": data}]})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "phase.unknown_dataset"


def test_dataset_tar_with_a_link_is_refused(env):
    _, org = env.user("olga", role="organizer")
    answer = env.client.post("/api/v1/datasets", headers=org,
                             files={"file": ("d.tar", entry_tar(link=True), "application/x-tar")})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "dataset.invalid"
