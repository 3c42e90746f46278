"""Account takeover by an organizer (issue 33 item 1), on a real server on a TCP socket.

At a55d28d any organizer got a reset link for any participant (`POST /users/{id}/reset-link`:
200, roles checked, never tenancy), set the password and logged in; and an API token made by
whoever held the account survived the owner's own later reset (only web sessions ended).
Now: admins reset anyone, an organizer only the participants they created (not one that signed
up itself and takes part in their competition, nor anyone else's), and a reset by link ends
every web session, every API token and every other open link of the account.
"""

from __future__ import annotations

import uuid

import pytest
from inprocess_support import zip_bytes
from live_server import LiveServer, form_nonce, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with live_server(tmp_path_factory.mktemp("takeover")) as running:
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _signup(server: LiveServer, name: str) -> tuple[int, str]:
    with server.client() as c:
        made = c.post("/api/v1/auth/signup", json={
            "username": name, "email": f"{name}@uni.example.org", "password": "correct horse"})
    assert made.status_code == 201, made.text
    return made.json()["user"]["id"], made.json()["token"]


def _competition(server: LiveServer, organizer: dict) -> dict:
    with server.client(organizer) as c:
        made = c.post("/api/v1/competitions", json={
            "slug": f"c-{uuid.uuid4().hex[:8]}", "title": "C",
            "phases": [{"name": "dev", "status": "open", "protocol": {"name": "fixed"}}]})
    assert made.status_code == 201, made.text
    return made.json()


def _reset_link(server: LiveServer, actor: dict, user_id: int):
    with server.client(actor) as c:
        return c.post(f"/api/v1/users/{user_id}/reset-link")


@pytest.fixture
def cast(server: LiveServer) -> dict:
    """Two organizers with a competition each; a participant who signed up and submitted to
    the second one; a participant the first organizer created."""
    tag = uuid.uuid4().hex[:6]
    org1 = bearer(server.user(f"o1{tag}", "organizer")["token"])
    org2 = bearer(server.user(f"o2{tag}", "organizer")["token"])
    _competition(server, org1)
    comp2 = _competition(server, org2)
    vic_id, vic_token = _signup(server, f"vic{tag}")
    with server.client(bearer(vic_token)) as c:  # takes part: org2 manages the account
        sent = c.post(f"/api/v1/phases/{comp2['phases'][0]['id']}/submissions",
                      files={"file": ("s.zip", zip_bytes(), "application/zip")})
        assert sent.status_code == 201, sent.text
    made = server.user(f"kid{tag}", actor=org1)
    return {"org1": org1, "org2": org2, "vic_id": vic_id, "vic_token": vic_token,
            "vic": f"vic{tag}", "kid_id": made["id"]}


def test_an_organizer_cannot_get_a_reset_link_for_someone_elses_participant(server, cast):
    answer = _reset_link(server, cast["org1"], cast["vic_id"])
    assert answer.status_code == 404, answer.text  # invisible to them, as if absent


def test_an_organizer_cannot_take_over_a_participant_of_their_own_competition(server, cast):
    """`vic` signed up and takes part in org2's competition: org2 manages them (sees them,
    may deny them) but may not take the account, which is theirs in every competition."""
    answer = _reset_link(server, cast["org2"], cast["vic_id"])
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "user.reset_not_yours"


def test_an_organizer_resets_the_participants_they_created_and_an_admin_anyone(server, cast):
    assert _reset_link(server, cast["org1"], cast["kid_id"]).status_code == 200
    assert _reset_link(server, cast["org2"], cast["kid_id"]).status_code == 404
    assert _reset_link(server, server.admin, cast["vic_id"]).status_code == 200


def test_a_reset_by_link_ends_every_session_token_and_open_link(server, cast):
    """What an attacker who held the account made (an API token, a web session, another link)
    dies when the owner resets the password."""
    with server.client() as browser:
        page = browser.get("/login").text
        logged = browser.post("/login", data={"csrf_token": form_nonce(page),
                                              "username": cast["vic"],
                                              "password": "correct horse"})
        assert logged.status_code == 303, logged.text
        assert browser.get("/my").status_code == 200
        with server.client(bearer(cast["vic_token"])) as api:
            kept = api.post("/api/v1/me/tokens", json={"name": "attacker"}).json()["token"]
        first = _reset_link(server, server.admin, cast["vic_id"]).json()["link"]
        second = _reset_link(server, server.admin, cast["vic_id"]).json()["link"]
        with server.client() as owner:
            path = "/" + second.split("/", 3)[3]
            form = owner.get(path)
            assert form.status_code == 200 and "ends every API token" in form.text
            done = owner.post(path, data={"csrf_token": form_nonce(form.text),
                                          "password": "new battery staple"})
            assert done.status_code == 200 and "Your new password is set" in done.text
            assert owner.get("/" + first.split("/", 3)[3]).status_code == 404  # dead too
        assert browser.get("/my").status_code == 303  # the web session ended
    for token in (cast["vic_token"], kept):
        with server.client(bearer(token)) as api:
            assert api.get("/api/v1/me").status_code == 401, "an API token survived the reset"
    with server.client() as c:
        again = c.post("/api/v1/auth/token", json={"username": cast["vic"],
                                                   "password": "new battery staple"})
    assert again.status_code == 200, again.text


def test_the_owner_changing_their_password_may_keep_their_api_tokens(server):
    """Their own change (knowing the current password): other browsers end, the one in use
    stays, and the API tokens stay only if they tick "keep"; by the API without keeping, every
    token ends, the caller's too."""
    name = f"own{uuid.uuid4().hex[:6]}"
    _, token = _signup(server, name)
    with server.client(bearer(token)) as api:
        laptop = api.post("/api/v1/me/tokens", json={"name": "laptop"}).json()["token"]
    browsers = [server.client(), server.client()]
    for browser in browsers:
        page = browser.get("/login").text
        assert browser.post("/login", data={"csrf_token": form_nonce(page), "username": name,
                                            "password": "correct horse"}).status_code == 303
    here, elsewhere = browsers
    profile = here.get("/profile").text
    wrong = here.post("/profile/password", data={
        "csrf_token": form_nonce(profile), "current_password": "not it",
        "password": "new battery staple", "keep_tokens": "1"})
    assert wrong.status_code == 401 and "current password is wrong" in wrong.text
    changed = here.post("/profile/password", data={
        "csrf_token": form_nonce(profile), "current_password": "correct horse",
        "password": "new battery staple", "keep_tokens": "1"})
    assert changed.status_code == 200 and "Your new password is set" in changed.text
    assert here.get("/my").status_code == 200  # the browser in use stays logged in
    assert elsewhere.get("/my").status_code == 303  # the other one is logged out
    for kept in (token, laptop):
        with server.client(bearer(kept)) as api:
            assert api.get("/api/v1/me").status_code == 200  # kept, as asked
    with server.client(bearer(token)) as api:
        again = api.post("/api/v1/me/password", json={
            "current_password": "new battery staple", "new_password": "third pass phrase"})
        assert again.status_code == 204, again.text
    for ended in (token, laptop):
        with server.client(bearer(ended)) as api:
            assert api.get("/api/v1/me").status_code == 401  # not kept: every token ended
    assert here.get("/my").status_code == 303
    for browser in browsers:
        browser.close()
