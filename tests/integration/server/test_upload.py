"""Uploading a submission: the happy path, and every unsafe zip refused with nothing stored."""

from __future__ import annotations

import os
import stat
import zipfile
from io import BytesIO

import pytest
from _server_support import MODEL, zip_bytes
from sqlalchemy import func, select

from server.models import Run, Submission


def stored_files(env) -> list:
    root = env.settings.storage
    return sorted(p.name for p in root.rglob("*") if p.is_file())


def counts(env) -> tuple[int, int]:
    with env.db.session() as s:
        return (s.execute(select(func.count(Submission.id))).scalar_one(),
                s.execute(select(func.count(Run.id))).scalar_one())


def test_upload_creates_submission_with_runs_and_enqueues_after_commit(env):
    phase = env.phase(runs_per_submission=3, queue="gpu")
    _, headers = env.user("ann")
    data = zip_bytes()  # built once: a zip embeds the time it was written
    answer = env.submit(phase.id, headers, data)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["state"] == "queued"
    assert [r["index"] for r in body["runs"]] == [0, 1, 2]
    assert body["queue_position"] == 1
    assert [(job[0], job[2]) for job in env.queue.jobs] == [(r["id"], "gpu") for r in body["runs"]]
    with env.db.session() as s:
        sub = s.get(Submission, body["id"])
        stored = env.settings.storage / sub.storage_path
        assert stored.read_bytes() == data
        assert stored.name == f"{sub.sha256}.zip"
    assert not list((env.settings.storage / "tmp").iterdir())


def test_submission_in_a_top_level_folder_records_its_root(env):
    phase = env.phase()
    _, headers = env.user("ann")
    answer = env.submit(phase.id, headers, zip_bytes([("kit/model.py", MODEL)]))
    assert answer.status_code == 201, answer.text
    with env.db.session() as s:
        assert s.get(Submission, answer.json()["id"]).zip_root == "kit"


def _symlink_zip() -> bytes:
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("model.py", MODEL)
        info = zipfile.ZipInfo("link")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


@pytest.mark.parametrize(("data", "code"), [
    (zip_bytes([("../evil.py", b"x"), ("model.py", MODEL)]), "zip.parent_path"),
    (zip_bytes([("/abs.py", b"x"), ("model.py", MODEL)]), "zip.absolute_path"),
    (zip_bytes([("helper.py", b"x")]), "zip.no_model"),
    (zip_bytes([("model.py", MODEL), ("big", b"\0" * 3 * 1024**2)]), "zip.bomb"),
    (_symlink_zip(), "zip.link"),
    (b"not a zip at all", "zip.corrupt"),
])
def test_unsafe_zip_is_refused_with_its_code_and_nothing_stored(env, data, code):
    phase = env.phase()
    _, headers = env.user("ann")
    answer = env.submit(phase.id, headers, data)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == code
    assert counts(env) == (0, 0)
    assert stored_files(env) == []
    assert env.queue.jobs == []


def test_upload_over_the_size_cap_is_refused_with_413(env):
    env.settings.max_upload_bytes = 1000
    phase = env.phase()
    _, headers = env.user("ann")
    data = zip_bytes([("model.py", MODEL), ("w", os.urandom(5000))])
    answer = env.submit(phase.id, headers, data)
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "upload.too_large"
    assert counts(env) == (0, 0)
    assert stored_files(env) == []


def test_upload_without_a_file_part_explains_the_field_name(env):
    phase = env.phase()
    _, headers = env.user("ann")
    answer = env.client.post(f"/api/v1/phases/{phase.id}/submissions", headers=headers,
                             files={"zip": ("s.zip", zip_bytes(), "application/zip")})
    assert answer.status_code == 422
    assert "'file'" in answer.json()["error"]["message"]


def test_closed_phase_refuses_and_stores_nothing(env):
    phase = env.phase(status="closed")
    _, headers = env.user("ann")
    answer = env.submit(phase.id, headers)
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "phase.closed"
    assert counts(env) == (0, 0)
    assert stored_files(env) == []


def test_broker_down_keeps_the_submission_queued_in_the_database(env):
    env.queue.fail = True
    phase = env.phase()
    _, headers = env.user("ann")
    answer = env.submit(phase.id, headers)
    assert answer.status_code == 201
    assert counts(env) == (1, 1)
