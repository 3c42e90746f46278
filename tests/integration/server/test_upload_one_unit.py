"""An upload is registered whole or not at all (issue 35): its method (name, description, code
link) is written in the transaction that registers the submission and its runs. It was stored in
a second transaction after registration had committed, so a failure there answered 500 for a
submission that stayed registered, queued and charged to the quota, without the method its owner
gave; the owner, told it failed, uploaded again and paid twice.

The failure at store time is a real one of the real database: a trigger on `submissions` refuses
one method name, as a constraint or a lost connection would refuse the write."""

from __future__ import annotations

import re

import pytest
from _server_support import zip_bytes
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from server.models import Participation, Run, Submission

REFUSED = "Refused-At-Store"


@pytest.fixture
def refusing_store(env):
    """A trigger refusing any write of a submission whose method name is REFUSED; dropped after
    the test (the session's database outlives it)."""
    with env.db.session(write=True) as s:
        s.execute(text(f"""
            CREATE FUNCTION refuse_method() RETURNS trigger AS $$
            BEGIN
              IF NEW.method_name = '{REFUSED}' THEN
                RAISE EXCEPTION 'the store refuses this method';
              END IF;
              RETURN NEW;
            END $$ LANGUAGE plpgsql"""))
        s.execute(text("CREATE TRIGGER refuse_method BEFORE INSERT OR UPDATE ON submissions "
                       "FOR EACH ROW EXECUTE FUNCTION refuse_method()"))
    try:
        # The app's own answer to an unexpected error (a 500), not the test client's re-raise.
        yield TestClient(env.client.app, raise_server_exceptions=False)
    finally:
        with env.db.session(write=True) as s:
            s.execute(text("DROP TRIGGER IF EXISTS refuse_method ON submissions"))
            s.execute(text("DROP FUNCTION IF EXISTS refuse_method()"))


def _nothing_kept(env) -> None:
    with env.db.session() as s:
        assert s.execute(select(func.count(Submission.id))).scalar_one() == 0, \
            "the submission stayed registered although its upload answered an error"
        assert s.execute(select(func.count(Run.id))).scalar_one() == 0
        assert sum(s.execute(select(Participation.n_uploads)).scalars()) == 0, \
            "the failed upload was charged to the quota"
    assert env.queue.jobs == []
    assert not list((env.settings.storage / "tmp").iterdir())
    assert not list(env.settings.storage.rglob("*.zip"))


def _upload(client, phase_id: int, headers: dict, method: str):
    return client.post(f"/api/v1/phases/{phase_id}/submissions", headers=headers,
                           files={"file": ("s.zip", zip_bytes(), "application/zip")},
                           data={"method": method, "description": "fine-tunes",
                                 "code_url": "https://example.org/repo"})


def test_a_method_the_store_refuses_leaves_no_submission_behind(env, refusing_store):
    phase_id = env.phase(quota_total=1).id
    _, headers = env.user("ann")
    failed = _upload(refusing_store, phase_id, headers, REFUSED)
    assert failed.status_code == 500, failed.text
    _nothing_kept(env)
    # Nothing was charged: the one upload the quota allows still goes through, method and all.
    made = _upload(refusing_store, phase_id, headers, "ProtoNet")
    assert made.status_code == 201, made.text
    got = env.client.get(f"/api/v1/submissions/{made.json()['id']}", headers=headers).json()
    assert (got["method_name"], got["method_description"], got["code_url"]) == (
        "ProtoNet", "fine-tunes", "https://example.org/repo")
    assert [job[0] for job in env.queue.jobs] == [r["id"] for r in made.json()["runs"]]


def test_the_web_form_registers_an_upload_whole_or_not_at_all(env, refusing_store):
    phase_id = env.phase().id
    _, headers = env.user("ann")
    client = refusing_store
    form = client.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    assert client.post("/login", data={"token": headers["Authorization"].split()[1],
                                           "csrf_token": csrf},
                           follow_redirects=False).status_code == 303
    page = client.get(f"/phases/{phase_id}/submit").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    failed = client.post(f"/phases/{phase_id}/submit",
                             files={"file": ("s.zip", zip_bytes(), "application/zip")},
                             data={"csrf_token": csrf, "method": REFUSED},
                             follow_redirects=False)
    assert failed.status_code == 500, failed.text[:300]
    _nothing_kept(env)
