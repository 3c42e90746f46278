"""Admin squatting (issue 33 item 11). At a55d28d, with sign-up open and no
ARENA_ADMIN_BOOTSTRAP_TOKEN yet, anyone signed up as "admin"; the bootstrap token set later
landed on that participant account and no admin existed. Now staff-like names (and their
look-alikes) are reserved, and the bootstrap refuses, at start-up, a name a non-admin holds."""

from __future__ import annotations

import re
import uuid

import pytest
from fastapi.testclient import TestClient
from inprocess_support import inprocess_app
from job_queue_fake import RecordingJobQueue
from sqlalchemy import select

from server.app import create_app
from server.core.config import Settings
from server.core.db import upgrade_database
from server.models import ApiToken, User


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("reserved")) as env:
        yield env


def signup(env, username: str):
    return env.client.post("/api/v1/auth/signup", json={
        "username": username, "email": f"{uuid.uuid4().hex[:8]}@uni.example.org",
        "password": "correct horse"})


@pytest.mark.parametrize("name", ["admin", "Admin", "ADMIN", "adm1n", "\u0430dmin", "root",
                                  "r00t", "administrator", "support_2", "arena", "staff",
                                  "system", "organizer", "Ａｄｍｉｎ"])
def test_signup_refuses_reserved_names_and_their_look_alikes(app_env, name):
    answer = signup(app_env, name)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] in ("user.reserved_name",
                                                "signup.bad_username")  # Cyrillic: not ASCII


def test_ordinary_names_are_not_reserved(app_env):
    for name in ("ada_l", "rooted", "modular", "hello", "arenas"):
        assert signup(app_env, f"{name}{uuid.uuid4().hex[:4]}").status_code == 201


def test_the_web_form_refuses_them_too(app_env):
    page = app_env.client.get("/signup").text
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer = app_env.client.post("/signup", data={
        "csrf_token": nonce, "username": "Admin", "email": "x@uni.example.org",
        "password": "correct horse"}, follow_redirects=False)
    assert answer.status_code == 422 and "reserved" in answer.text


def test_organizers_cannot_create_them_admins_can(app_env):
    organizer = app_env.token_for(f"org{uuid.uuid4().hex[:6]}", "organizer")
    refused = app_env.client.post("/api/v1/users", headers=organizer,
                                  json={"username": "support"})
    assert refused.status_code == 422, refused.text
    made = app_env.client.post("/api/v1/users", headers=app_env.admin,
                               json={"username": "support"})
    assert made.status_code == 201, made.text


def test_the_bootstrap_refuses_a_name_a_participant_holds(tmp_path):
    """A database from before the rule, where someone signed up as "Admin": the server does
    not start (the token would make them admin), and says how to fix it."""
    from server.services.names import name_key  # (not at a55d28d: this test fails there)

    url = f"sqlite:///{tmp_path / 'arena.db'}"
    upgrade_database(url)
    squatter = Settings(data_dir=tmp_path, database_url=url, auto_migrate=False,
                        reconcile_interval_s=0)
    app = create_app(squatter, queue=RecordingJobQueue())
    with app.state.db.session(write=True) as session:
        session.add(User(username="Admin", name_key=name_key("Admin"), role="participant"))
    token = uuid.uuid4().hex
    settings = squatter.model_copy(update={"admin_bootstrap_token": token})
    app = create_app(settings, queue=RecordingJobQueue())
    refused = pytest.raises(Exception, match="refusing to start.*ARENA_ADMIN_BOOTSTRAP_USERNAME")
    with refused, TestClient(app):
        pass
    with app.state.db.session() as session:
        held = session.execute(select(User).where(User.username == "Admin")).scalar_one()
        assert held.role == "participant"
        assert session.execute(select(ApiToken).where(ApiToken.user_id == held.id)).first() \
            is None
    fixed = settings.model_copy(update={"admin_bootstrap_username": "ops-admin"})
    app = create_app(fixed, queue=RecordingJobQueue())
    with TestClient(app) as client:
        me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200 and me.json()["role"] == "admin", me.text
