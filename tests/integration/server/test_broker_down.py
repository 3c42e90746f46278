"""A broker that is down (issue 24, trap 14): an upload still succeeds and its run stays queued
in the database; the server logs one line per batch with the fix (no traceback per job), and
the organizer dashboard says the broker does not answer until a send succeeds again."""

from __future__ import annotations

import logging

import pytest
from _server_support import zip_bytes
from fastapi.testclient import TestClient
from test_pages import login

from server.app import create_app
from server.core.config import Settings
from server.services.queue import CeleryJobQueue, enqueue_quietly

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


def test_enqueue_to_a_down_broker_is_one_line_and_noted(caplog):
    queue = CeleryJobQueue(DOWN)
    caplog.set_level(logging.WARNING)
    assert enqueue_quietly(queue, [(1, "t1", "arena"), (2, "t2", "arena"), (3, "t3", "arena")]) \
        == 0
    failures = [r for r in caplog.records if r.getMessage().startswith("queue.enqueue.failed")]
    assert len(failures) == 1 and failures[0].exc_info is None
    message = failures[0].getMessage()
    assert "3 run(s) stay queued" in message and "ARENA_BROKER_URL" in message
    assert queue.broker_failure["waiting"] == 3


@pytest.fixture
def down_env(database_url, tmp_path):
    from _server_support import Clock, Env

    settings = Settings(data_dir=tmp_path / "data", database_url=database_url,
                        auto_migrate=False, reconcile_interval_s=0, broker_url=DOWN)
    queue, clock = CeleryJobQueue(DOWN), Clock()
    app = create_app(settings, queue=queue, clock=clock)
    with TestClient(app) as client:
        yield Env(client=client, db=app.state.db, queue=queue, clock=clock, settings=settings)


def test_uploads_stay_queued_and_the_dashboard_says_the_broker_is_down(down_env):
    env = down_env
    _, ann = env.user("ann")
    _, olga = env.user("olga", role="admin")
    phase = env.phase()
    answer = env.client.post(f"/api/v1/phases/{phase.id}/submissions", headers=ann,
                             files={"file": ("s.zip", zip_bytes(), "application/zip")})
    assert answer.status_code == 201, answer.text
    assert answer.json()["state"] == "queued"
    login(env, olga)
    page = env.client.get("/organizer").text
    assert 'id="broker-down"' in page and "The job broker does not answer" in page
    assert "1 run(s) stay queued" in page
    assert 'id="no-worker"' in page  # nobody takes them: the dashboard says what to do


def test_an_idle_worker_that_has_reported_shows_as_idle_not_silent(env):
    from test_pages import login as page_login

    _, olga = env.user("olga", role="admin")
    _, ann = env.user("ann")
    phase = env.phase()
    env.submit(phase.id, ann)
    run_id, token, _ = env.queue.jobs[-1]
    auth = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "gpu-7"},
                              headers=auth).json()
    env.client.post(f"/internal/runs/{run_id}/finish", headers=auth, json={
        "fencing_token": claimed["fencing_token"], "state": "failed", "reason": "import_error",
        "message": "boom", "log": ""})
    env.clock.advance(hours=2)  # long past the silence threshold, holding nothing
    page_login(env, olga)
    page = env.client.get("/organizer").text
    row = page[page.index("<code>gpu-7</code>"):]
    row = row[:row.index("</tr>")]
    assert "idle" in row and "silent" not in row, row
