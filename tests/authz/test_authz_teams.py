"""The authorization matrix of every team route, web and API (issue 33), for the roles teams
have: anonymous, pending (asked to take part, not approved), participant (approved, in no
team), member, captain, removed member (was in the team, its captain removed them),
organizer of this competition, organizer of another one, admin.

The world: an approval-mode competition with teams; team A (captain, member) where the removed
member made a finished submission before the captain removed them (the invite code rotated
then); team B of a rival. A route with no rule here fails, so a new team route cannot ship
without someone deciding who may call it. Each answer is allowed, denied (401/403/404 or a
redirect to the login page) or a server error (never acceptable); a denial changes no team,
membership or selection, and each allowed state change gets a world of its own (or shares
it with the route's other allowed role where each makes or joins a team of its own). Web POSTs
carry the session's valid CSRF token, so a denial comes from the role check.

The denials and the GETs of every route share one world (as in test_authz_forms.py): a denial
changes nothing (checked: teams, memberships and selections as before) and a GET reads. One
such world per route was 15 of the 31 worlds built. Where each role let in makes or joins a
team of its own (`TAKE_TURNS`), the two teamless roles take turns on one world of the route's:
a world each was 4 of the 17 left.
"""

from __future__ import annotations

import html
import re
import uuid
from dataclasses import dataclass

import pytest
from authz_world import app_routes, finish_run, outcome
from fastapi.testclient import TestClient
from inprocess_support import InProcess, inprocess_app, zip_bytes
from sqlalchemy import select

from server.models import Competition, Submission, Team, TeamMember

ROLES = ("anonymous", "pending", "participant", "member", "captain", "removed", "organizer",
         "other_organizer", "admin")
#            anonymous pending participant member captain removed organizer other_org admin
SIGNED_IN = "DAAAAAAAA"
IN_A = "DDDAADDDD"  # current members of team A
CAPTAIN = "DDDDADDDD"
TEAMLESS = "DDADDADDD"  # approved participants in no team (the removed member is one now)
NOBODY = "DDDDDDDDD"
EXPECTED: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/competitions/{competition_id}/teams"): SIGNED_IN,
    ("GET", "/api/v1/competitions/{competition_id}/team"): IN_A,
    ("POST", "/api/v1/competitions/{competition_id}/teams"): TEAMLESS,
    ("POST", "/api/v1/competitions/{competition_id}/teams/join"): TEAMLESS,
    ("POST", "/api/v1/competitions/{competition_id}/team/leave"): IN_A,
    ("DELETE", "/api/v1/teams/{team_id}/members/{member_id}"): CAPTAIN,
    ("GET", "/competitions/{competition_id}/team"): SIGNED_IN,
    ("GET", "/teams/join/{code}"): SIGNED_IN,
    ("POST", "/competitions/{competition_id}/team/create"): TEAMLESS,
    ("POST", "/teams/join/{code}"): TEAMLESS,
    ("POST", "/competitions/{competition_id}/team/leave"): IN_A,
    ("POST", "/competitions/{competition_id}/team/members/{member_id}/remove"): CAPTAIN,
}
# Cells that are not routes of their own: the code the removed member knew, and the team's
# submission (made by the removed member) that only current members select.
EXTRA: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/competitions/{competition_id}/teams/join old code"): NOBODY,
    ("POST", "/teams/join/{old_code}"): NOBODY,
    ("POST", "/api/v1/submissions/{team_submission_id}/select"): IN_A,
}
# Routes where each role let in makes or joins a team of its own (both teamless roles may, one
# after the other): they take turns on one world of the route's own, each checked to change a
# team; each allowed role of the other routes (leave, remove, select) gets a fresh world.
TAKE_TURNS = {("POST", "/api/v1/competitions/{competition_id}/teams"),
              ("POST", "/api/v1/competitions/{competition_id}/teams/join"),
              ("POST", "/competitions/{competition_id}/team/create"),
              ("POST", "/teams/join/{code}")}
TEAM_PATHS = re.compile(r"/teams?(/|$)|/team/")
FORM_FIELD = re.compile(r'<input type="hidden" name="csrf_token" value="([^"]+)"')


@dataclass
class TeamWorld:
    env: InProcess
    headers: dict[str, dict[str, str]]
    ids: dict[str, object]


def build_team_world(env: InProcess) -> TeamWorld:
    tag = uuid.uuid4().hex[:8]
    h = {"anonymous": {}, "admin": env.admin,
         "organizer": env.token_for(f"org-{tag}", "organizer"),
         "other_organizer": env.token_for(f"orgb-{tag}", "organizer")}
    for role in ("pending", "participant", "member", "captain", "removed", "rival"):
        h[role] = env.token_for(f"{role}-{tag}")
    comp = env.competition(h["organizer"])
    env.competition(h["other_organizer"])
    cid, phase_id = comp["id"], comp["phases"][0]["id"]
    with env.db.session() as s:
        row = s.get_one(Competition, cid)
        row.teams_allowed, row.team_max_size, row.participation = True, 10, "approval"
    ids = {}
    for role in ("pending", "participant", "member", "captain", "removed", "rival"):
        asked = env.client.post(f"/api/v1/competitions/{cid}/participation", headers=h[role])
        assert asked.status_code in (200, 201), asked.text
        ids[role] = env.client.get("/api/v1/me", headers=h[role]).json()["id"]
        if role != "pending":
            approved = env.client.post(
                f"/api/v1/competitions/{cid}/participants/{ids[role]}/approve",
                headers=h["organizer"])
            assert approved.status_code == 200, approved.text
    teams = f"/api/v1/competitions/{cid}/teams"
    team_a = env.client.post(teams, headers=h["captain"], json={"name": "Team A"}).json()
    assert env.client.post(teams, headers=h["rival"], json={"name": "Team B"}).status_code == 201
    for role in ("member", "removed"):
        joined = env.client.post(f"{teams}/join", headers=h[role],
                                 json={"code": team_a["invite_code"]})
        assert joined.status_code == 200, joined.text
    made = env.upload(phase_id, h["removed"], zip_bytes([("model.py", f"# {tag}\n".encode())]))
    assert made.status_code == 201, made.text
    finish_run(env, made.json()["runs"][0]["id"])
    removed = env.client.delete(f"/api/v1/teams/{team_a['id']}/members/{ids['removed']}",
                                headers=h["captain"])
    assert removed.status_code == 204, removed.text
    code = env.client.get(f"/api/v1/competitions/{cid}/team", headers=h["captain"]).json()
    return TeamWorld(env=env, headers=h, ids={
        "competition_id": cid, "team_id": team_a["id"], "member_id": ids["member"],
        "code": code["invite_code"], "old_code": team_a["invite_code"],
        "team_submission_id": made.json()["id"]})


def browser(world: TeamWorld, role: str) -> tuple[TestClient, str]:
    """A client of the role's own, logged in through the form, and its session's CSRF token."""
    client = TestClient(world.env.client.app, follow_redirects=False)
    if role == "anonymous":
        return client, ""
    page = client.get("/login").text
    token = world.headers[role]["Authorization"].removeprefix("Bearer ")
    answer = client.post("/login", data={"csrf_token": FORM_FIELD.search(page).group(1),
                                         "token": token})
    assert answer.status_code == 303, answer.text
    return client, html.unescape(FORM_FIELD.search(client.get("/my").text).group(1))


def call(world: TeamWorld, method: str, path: str, role: str):
    old = path.endswith(" old code")
    path = path.removesuffix(" old code")
    url = re.sub(r"{(\w+)}", lambda m: str(world.ids[m.group(1)]), path)
    if not path.startswith("/api/"):
        client, csrf = browser(world, role)
        if method == "GET":
            return client.get(url)
        return client.post(url, data={"csrf_token": csrf, "name": f"Web {role}",
                                      "accept_terms": "yes"})
    headers = world.headers[role]
    if path.endswith("/teams/join"):
        code = world.ids["old_code" if old else "code"]
        return world.env.client.post(url, headers=headers, json={"code": code})
    if path.endswith("/teams"):
        body = {"name": f"Api {role}"} if method == "POST" else None
        return world.env.client.request(method, url, headers=headers, json=body)
    return world.env.client.request(method, url, headers=headers)


def team_state(env: InProcess) -> tuple:
    """Teams, memberships and selections: what a denied team call must leave alone."""
    with env.db.session() as s:
        return (s.execute(select(Team.id, Team.name, Team.captain_id, Team.invite_code,
                                 Team.dissolved_at).order_by(Team.id)).all(),
                s.execute(select(TeamMember.team_id, TeamMember.user_id)
                          .order_by(TeamMember.id)).all(),
                s.execute(select(Submission.id, Submission.team_id, Submission.is_selected)
                          .order_by(Submission.id)).all())


@pytest.fixture(scope="module")
def team_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("authz-teams")) as env:
        yield env


def test_every_team_route_has_a_rule(team_env):
    served = {(m, p) for m, p in app_routes(team_env.client.app)
              if TEAM_PATHS.search(p) and not p.startswith("/internal")}
    assert sorted(served - set(EXPECTED)) == [], "new team routes need a row in EXPECTED"
    assert sorted(set(EXPECTED) - served) == [], "rules for team routes that no longer exist"


@pytest.fixture(scope="module")
def shared_world(team_env: InProcess) -> TeamWorld:
    """The world of every route's denials and GETs: they change nothing (each denial checked)."""
    return build_team_world(team_env)


@pytest.mark.parametrize(("method", "path"), sorted({**EXPECTED, **EXTRA}))
def test_the_team_matrix_holds(team_env, shared_world, method, path):
    rule = {**EXPECTED, **EXTRA}[(method, path)]
    shared, turns = shared_world, None  # turns: the world of the allowed roles' state changes
    failures = []
    for role, want in zip(ROLES, rule, strict=True):
        world = shared
        if want == "A" and method != "GET":
            if turns is None or (method, path) not in TAKE_TURNS:
                turns = build_team_world(team_env)
            world = turns
        before = team_state(team_env)
        answer = call(world, method, path, role)
        got, said = outcome(answer), f"{answer.status_code} {answer.text[:140]!r}"
        if got == "error" or got != {"A": "allowed", "D": "denied"}[want]:
            failures.append(f"{method} {path} as {role}: expected {want}, got {said}")
        elif want == "D" and team_state(team_env) != before:
            failures.append(f"{method} {path} as {role}: denied ({said}) but changed a team")
        elif want == "A" and method != "GET" and team_state(team_env) == before:
            failures.append(f"{method} {path} as {role}: allowed ({said}) but changed nothing")
    assert failures == []
