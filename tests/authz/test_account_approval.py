"""Cross-tenant account kill (issue 33 item 2). At a55d28d an organizer approved any user id into
their own competition (`services/participation.py` `decide` made the row), which made the account
"managed" by them (`services/tenancy.py`): its email showed in their account list and they could
revoke it, platform-wide. Now organizers decide only on accounts that asked to join the
competition, submitted to it, or that they created; other accounts stay invisible to them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from inprocess_support import InProcess, inprocess_app, zip_bytes
from sqlalchemy import select

from server.core.security import csrf_token
from server.models import User
from server.web.sessions import open_session


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("approval")) as env:
        yield env


def _approval_competition(env: InProcess, organizer: dict) -> dict:
    comp = env.competition(organizer)
    mode = env.client.put(f"/api/v1/competitions/{comp['id']}/participation/mode",
                          headers=organizer, json={"mode": "approval"})
    assert mode.status_code == 200, mode.text
    return comp


@pytest.fixture
def cast(app_env: InProcess) -> dict:
    tag = uuid.uuid4().hex[:6]
    attacker = app_env.token_for(f"mallory{tag}", "organizer")
    victim = app_env.client.post("/api/v1/auth/signup", json={
        "username": f"vic{tag}", "email": f"vic{tag}@uni.example.org",
        "password": "correct horse"})
    assert victim.status_code == 201, victim.text
    return {"attacker": attacker, "comp": _approval_competition(app_env, attacker),
            "victim_id": victim.json()["user"]["id"],
            "victim": {"Authorization": f"Bearer {victim.json()['token']}"}}


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_an_organizer_cannot_decide_on_an_account_that_never_asked(app_env, cast, verb):
    client, comp = app_env.client, cast["comp"]
    answer = client.post(f"/api/v1/competitions/{comp['id']}/participants/"
                         f"{cast['victim_id']}/{verb}", headers=cast["attacker"])
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["code"] == "participation.no_request"
    listed = client.get("/api/v1/users", headers=cast["attacker"]).json()
    assert cast["victim_id"] not in [u["id"] for u in listed]  # no email shown
    kill = client.post(f"/api/v1/users/{cast['victim_id']}/revoke", headers=cast["attacker"])
    assert kill.status_code == 404, kill.text
    assert client.get("/api/v1/me", headers=cast["victim"]).status_code == 200


def test_the_web_form_refuses_the_same(app_env, cast):
    """The dashboard's Approve button calls the same service."""
    with app_env.db.session(write=True) as session:
        organizer = session.execute(select(User).where(User.role == "organizer")
                                    .order_by(User.id.desc())).scalars().first()
        cookie = open_session(session, organizer, datetime.now(UTC))
    client = app_env.client
    client.cookies.set("arena_session", cookie)
    try:
        answer = client.post(
            f"/organizer/competitions/{cast['comp']['id']}/participants/{cast['victim_id']}"
            "/approve", data={"csrf_token": csrf_token(app_env.settings.secret_key, cookie)},
            follow_redirects=False)
    finally:
        client.cookies.clear()
    assert answer.status_code == 404, answer.text


def test_a_request_a_submission_or_an_own_account_may_be_decided(app_env, cast):
    client, comp, attacker = app_env.client, cast["comp"], cast["attacker"]
    base = f"/api/v1/competitions/{comp['id']}/participants"
    asked = client.post(f"/api/v1/competitions/{comp['id']}/participation",
                        headers=cast["victim"])
    assert asked.status_code == 200 and asked.json()["status"] == "pending", asked.text
    approved = client.post(f"{base}/{cast['victim_id']}/approve", headers=attacker)
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    mine = client.post("/api/v1/users", headers=attacker,
                       json={"username": f"kid{uuid.uuid4().hex[:6]}"}).json()
    assert client.post(f"{base}/{mine['id']}/approve", headers=attacker).status_code == 200
    # An open competition: a participant who submitted may be denied without a request.
    open_comp = app_env.competition(attacker)
    sub = app_env.upload(open_comp["phases"][0]["id"], cast["victim"], zip_bytes())
    assert sub.status_code == 201, sub.text
    denied = client.post(f"/api/v1/competitions/{open_comp['id']}/participants/"
                         f"{cast['victim_id']}/deny", headers=attacker)
    assert denied.status_code == 200 and denied.json()["status"] == "denied", denied.text
