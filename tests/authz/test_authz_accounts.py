"""The authorization matrix of the ACCOUNT routes (issue 33): users, reset links, tokens, the
profile, participation decisions and sign-up, for anonymous, a pending participant (asked to
join the approval competition, not yet decided), an approved participant, the organizer of
this competition, the organizer of another one, and an admin. Every cell is a real request on
a fresh world, through the API and the web forms (with a valid session and CSRF token, so a
denial is the role check's, not the CSRF check's). Team routes: A2's matrix.

The subjects: `pending` and `participant` signed up themselves and asked to join `comp`
(organizer's, by approval); `kid` was created by the organizer. An organizer manages the first
two (sees them, decides on them, may revoke them) but may take over only `kid` (reset link).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from authz_world import outcome
from inprocess_support import InProcess, inprocess_app
from sqlalchemy import select

from server.core.security import csrf_token
from server.models import User
from server.web.sessions import open_session

ROLES = ("anonymous", "pending", "participant", "organizer", "other_organizer", "admin")


@dataclass
class AccountWorld:
    env: InProcess
    headers: dict[str, dict[str, str]]
    ids: dict[str, int | str]

    def cookie_for(self, role: str) -> str | None:
        """A web session for `role`'s account (None for anonymous)."""
        if role == "anonymous":
            return None
        me = self.env.client.get("/api/v1/me", headers=self.headers[role]).json()
        with self.env.db.session(write=True) as session:
            user = session.execute(select(User).where(User.id == me["id"])).scalar_one()
            return open_session(session, user, datetime.now(UTC))


def _signup(env: InProcess, name: str) -> tuple[int, dict[str, str]]:
    made = env.client.post("/api/v1/auth/signup", json={
        "username": name, "email": f"{name}@uni.example.org", "password": "correct horse"})
    assert made.status_code == 201, made.text
    return made.json()["user"]["id"], {"Authorization": f"Bearer {made.json()['token']}"}


def build(env: InProcess) -> AccountWorld:
    tag = uuid.uuid4().hex[:6]
    organizer = env.token_for(f"org-{tag}", "organizer")
    other_organizer = env.token_for(f"org2-{tag}", "organizer")
    comp = env.competition(organizer)["id"]
    other_comp = env.competition(other_organizer)["id"]
    client = env.client
    assert client.put(f"/api/v1/competitions/{comp}/participation/mode", headers=organizer,
                      json={"mode": "approval"}).status_code == 200
    pending_id, pending = _signup(env, f"pend-{tag}")
    participant_id, participant = _signup(env, f"part-{tag}")
    for who in (pending, participant):
        asked = client.post(f"/api/v1/competitions/{comp}/participation", headers=who)
        assert asked.status_code == 200 and asked.json()["status"] == "pending", asked.text
    approved = client.post(f"/api/v1/competitions/{comp}/participants/{participant_id}/approve",
                           headers=organizer)
    assert approved.status_code == 200, approved.text
    kid = client.post("/api/v1/users", headers=organizer, json={"username": f"kid-{tag}"})
    laptop = client.post("/api/v1/me/tokens", headers=participant, json={"name": "laptop"})
    return AccountWorld(env=env, headers={
        "anonymous": {}, "pending": pending, "participant": participant,
        "organizer": organizer, "other_organizer": other_organizer, "admin": env.admin},
        ids={"comp": comp, "other_comp": other_comp, "pending_id": pending_id,
             "participant_id": participant_id, "kid_id": kid.json()["id"],
             "token_id": laptop.json()["id"], "participant": f"part-{tag}",
             "bad_link": "not-a-reset-link"})


def _fresh_name(world: AccountWorld) -> dict:
    name = f"new-{uuid.uuid4().hex[:8]}"
    return {"username": name, "email": f"{name}@uni.example.org", "password": "correct horse"}


Body = dict | Callable[[AccountWorld], dict] | None


@dataclass(frozen=True)
class Cell:
    method: str
    path: str
    rule: str  # one letter per role in ROLES order: A allowed, D denied
    body: Body = None
    web: bool = False  # a web form: posted with the role's session and its CSRF token


PUBLIC, SIGNED_IN, STAFF = "AAAAAA", "DAAAAA", "DDDAAA"
ORGANIZER_OF_IT, ADMIN, PARTICIPANT_ONLY, NOBODY = "DDDADA", "DDDDDA", "DDADDD", "DDDDDD"
CELLS = [
    # sign-up and login are for anyone
    Cell("POST", "/api/v1/auth/signup", PUBLIC, _fresh_name),
    Cell("POST", "/api/v1/auth/token", PUBLIC,
         lambda w: {"username": w.ids["participant"], "password": "correct horse"}),
    Cell("GET", "/signup", PUBLIC), Cell("GET", "/login", PUBLIC), Cell("GET", "/forgot", PUBLIC),
    Cell("GET", "/verify-email/{pending_id}/" + "0" * 64, NOBODY),  # a wrong link
    Cell("GET", "/reset/{bad_link}", NOBODY),  # an unknown reset link: 404 for everyone
    # one's own account and tokens
    Cell("GET", "/api/v1/me", SIGNED_IN),
    Cell("GET", "/api/v1/me/tokens", SIGNED_IN),
    Cell("POST", "/api/v1/me/tokens", SIGNED_IN, {"name": "ci"}),
    Cell("DELETE", "/api/v1/me/tokens/{token_id}", PARTICIPANT_ONLY),
    Cell("GET", "/profile", SIGNED_IN),
    Cell("POST", "/profile/tokens", SIGNED_IN, {"name": "cluster"}, web=True),
    Cell("POST", "/profile/tokens/{token_id}/revoke", PARTICIPANT_ONLY, {}, web=True),
    Cell("POST", "/profile/verify-email", NOBODY, {}, web=True),  # nobody here waits for one
    # (the same password again, keeping the API tokens: the module's admin lives on)
    Cell("POST", "/profile/password", SIGNED_IN, {"current_password": "correct horse",
         "password": "correct horse", "keep_tokens": "1"}, web=True),
    Cell("POST", "/api/v1/me/password", SIGNED_IN, {"current_password": "correct horse",
         "new_password": "correct horse", "keep_api_tokens": True}),
    # accounts as staff manage them
    Cell("GET", "/api/v1/users", STAFF),
    Cell("POST", "/api/v1/users", STAFF, lambda w: {"username": _fresh_name(w)["username"]}),
    Cell("POST", "/api/v1/users/{pending_id}/revoke", ORGANIZER_OF_IT),
    Cell("POST", "/api/v1/users/{participant_id}/revoke", ORGANIZER_OF_IT),
    Cell("POST", "/api/v1/users/{pending_id}/reset-link", ADMIN),  # signed up: no takeover
    Cell("POST", "/api/v1/users/{participant_id}/reset-link", ADMIN),
    Cell("POST", "/api/v1/users/{kid_id}/reset-link", ORGANIZER_OF_IT),  # the organizer's own
    # participation
    Cell("GET", "/api/v1/competitions/{comp}/participation", SIGNED_IN),
    Cell("POST", "/api/v1/competitions/{comp}/participation", SIGNED_IN),
    Cell("PUT", "/api/v1/competitions/{comp}/participation/mode", ORGANIZER_OF_IT,
         {"mode": "approval"}),
    Cell("GET", "/api/v1/competitions/{comp}/participants", ORGANIZER_OF_IT),
    Cell("POST", "/api/v1/competitions/{comp}/participants/{pending_id}/approve",
         ORGANIZER_OF_IT),
    Cell("POST", "/api/v1/competitions/{comp}/participants/{pending_id}/deny", ORGANIZER_OF_IT),
    Cell("POST", "/api/v1/competitions/{comp}/participants/{participant_id}/deny",
         ORGANIZER_OF_IT),
    # the other organizer's competition: the pending participant never asked to join it
    Cell("POST", "/api/v1/competitions/{other_comp}/participants/{pending_id}/approve", ADMIN),
    Cell("POST", "/organizer/competitions/{comp}/participants/{pending_id}/approve",
         ORGANIZER_OF_IT, {}, web=True),
    Cell("POST", "/organizer/competitions/{other_comp}/participants/{pending_id}/approve",
         ADMIN, {}, web=True),
    Cell("POST", "/organizer/competitions/{comp}/participants/{pending_id}/deny",
         ORGANIZER_OF_IT, {}, web=True),
    Cell("POST", "/organizer/competitions/{other_comp}/participants/{pending_id}/deny",
         ADMIN, {}, web=True),
]


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("authz-accounts"),
                       signup_per_address_per_hour=0) as env:
        yield env


def call(world: AccountWorld, cell: Cell, role: str):
    client = world.env.client
    url = re.sub(r"{(\w+)}", lambda m: str(world.ids[m.group(1)]), cell.path)
    body = cell.body(world) if callable(cell.body) else cell.body
    if not cell.web:
        kwargs = {"json": body} if cell.method in ("POST", "PUT") and body is not None else {}
        if cell.path.startswith("/api/"):
            return client.request(cell.method, url, headers=world.headers[role],
                                  follow_redirects=False, **kwargs)
        cookie = world.cookie_for(role)
        client.cookies.clear()
        if cookie:
            client.cookies.set("arena_session", cookie)
        try:
            return client.request(cell.method, url, follow_redirects=False)
        finally:  # the next call's role brings its own, or none
            client.cookies.clear()
    cookie = world.cookie_for(role)
    form = dict(body or {})
    client.cookies.clear()
    if cookie:
        client.cookies.set("arena_session", cookie)
        form["csrf_token"] = csrf_token(world.env.settings.secret_key, cookie)
    try:
        return client.post(url, data=form, follow_redirects=False)
    finally:
        client.cookies.clear()


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c.method} {c.path}")
def test_account_route_for_every_role(app_env, cell):
    world = build(app_env)  # one per route: a denial comes before any change
    failures = []
    for role, want in zip(ROLES, cell.rule, strict=True):
        answer = call(world, cell, role)
        got = outcome(answer)
        if got == "error" or got != {"A": "allowed", "D": "denied"}[want]:
            failures.append(f"{role}: expected {want}, got {answer.status_code} "
                            f"{answer.text[:160]!r}")
        if cell.web and role != "anonymous":
            assert "auth.csrf" not in answer.text, f"{role}: refused by the CSRF check"
    assert failures == []


def test_every_account_route_is_in_the_matrix(app_env):
    """A new account route (users, tokens, profile, participation, sign-up, reset, verify)
    needs a row here."""
    from authz_world import app_routes

    account = re.compile(r"^/api/v1/(users|me$|me/tokens|me/password|auth/)|/participation"
                         r"|/participants"
                         r"|^/(signup|login|forgot|profile|verify-email|reset)")
    served = {(m, p) for m, p in app_routes(app_env.client.app) if account.search(p)}
    covered = {(c.method, re.sub(r"{(\w+)}", "{x}", c.path)) for c in CELLS}
    covered = {(m, re.sub(r"/0{64}$", "/{x}", p)) for m, p in covered}
    generic = {(m, re.sub(r"{(\w+)(:\w+)?}", "{x}", p)) for m, p in served}
    skipped = {("POST", "/login"), ("POST", "/logout"), ("POST", "/signup"), ("POST", "/forgot"),
               ("POST", "/reset/{x}")}  # forms with a form nonce: test_authz_forms.py
    assert sorted(generic - covered - skipped) == []


def test_organizers_see_only_the_accounts_they_manage(app_env):
    world = build(app_env)
    client, ids = app_env.client, world.ids
    mine = {u["id"]: u for u in client.get("/api/v1/users",
                                          headers=world.headers["organizer"]).json()}
    theirs = {u["id"] for u in client.get("/api/v1/users",
                                          headers=world.headers["other_organizer"]).json()}
    assert {ids["pending_id"], ids["participant_id"], ids["kid_id"]} <= set(mine)
    assert mine[ids["pending_id"]]["email"]  # managed: the organizer sees the address
    assert not {ids["pending_id"], ids["participant_id"], ids["kid_id"]} & theirs
