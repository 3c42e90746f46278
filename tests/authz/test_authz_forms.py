"""The web forms' role checks, with a valid CSRF token: every state-changing page route (a
non-GET route outside /api and /internal, generated from app.routes) x every role.

The route x role matrix (test_authz_matrix.py) only shows that a form POST without its token is
refused to everyone. Here each role logs in through the real login form (GET /login for the
double-submit cookie, POST /login with its API token; the session lives in the HttpOnly cookie
of that role's own client), fetches the page that carries the form, and posts the form's hidden
fields. A role the page does not offer the form to takes its session's token from the logout
form instead, which is as valid (the token is an HMAC of the session cookie), so a denial can
only come from the role check. Anonymous has no session, hence no token.

  allowed: not an error or a denial, and the route's state change is in the database;
  denied:  401/403/404 or a redirect to the login page, never the CSRF error for a signed-in
           role, and the database (every table) and the job queue exactly as before.

The page offers the form to exactly the roles allowed to post it (login aside: its form is
shown to everyone; "anonymous" there means no valid API token). The denied roles of every
route share one world (denials change nothing, and each one is checked: every table and the
queue as before, so the world stays as built); each allowed role gets a fresh one, except
where each role's effect is its own (its sessions, tokens, submissions, answers, membership, a
count it adds one to: `Form.own`): there the allowed roles take turns on one world per route,
each observed just before and after its own post. One world per route's denials was 31 of the
118 worlds built, about a quarter of the test's time; one per allowed role of the `own` routes
41 of the 88 left.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from authz_world import (
    ROLES,
    World,
    app_routes,
    build_world,
    changed_tables,
    outcome,
    snapshot,
)
from fastapi.testclient import TestClient
from inprocess_support import InProcess, inprocess_app, zip_bytes
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.models import (
    ApiToken,
    CompetitionMember,
    FactsheetAnswer,
    Phase,
    PoolCredential,
    PoolPhase,
    Run,
    Submission,
    TeamMember,
    User,
    WorkerPool,
)

#            anonymous, owner, other, organizer, other_organizer, admin
PUBLIC, SIGNED_IN, OWNER_OR_ORGANIZER, OWNER_ONLY, ORGANIZER_OF_IT = (
    "AAAAAA", "DAAAAA", "DADADA", "DADDDD", "DDDADA")


@dataclass
class FormWorld:
    """build_world's world plus what the forms act on: a draft phase in the organizer's
    competition and a still-queued submission of the owner (the finished one stays
    ids['submission_id'])."""

    env: InProcess
    world: World
    ids: dict[str, object]
    user_ids: dict[str, int | None]

    def token(self, role: str) -> str:
        return self.world.headers[role].get("Authorization", "").removeprefix("Bearer ")


def build_form_world(env: InProcess) -> FormWorld:
    world = build_world(env)
    organizer, owner = world.headers["organizer"], world.headers["owner"]
    draft = env.client.post(f"/api/v1/competitions/{world.ids['competition_id']}/phases",
                            headers=organizer, json={"name": "draft"})
    assert draft.status_code == 201 and draft.json()["status"] == "draft", draft.text
    queued = env.upload(world.ids["phase_id"], owner, zip_bytes([("model.py", b"# queued\n")]))
    assert queued.status_code == 201 and queued.json()["state"] == "queued", queued.text
    user_ids: dict[str, int | None] = {"anonymous": None}
    for role in ROLES[1:]:
        me = env.client.get("/api/v1/me", headers=world.headers[role])
        assert me.status_code == 200, me.text
        user_ids[role] = me.json()["id"]
    asked = _approval_competition(env, world)
    ended = env.client.post(f"/api/v1/competitions/{world.ids['competition_id']}/phases",
                            headers=organizer, json={"name": "ended", "status": "open",
                                                   "leaderboard": {"test_data": "secret"}})
    assert ended.status_code == 201, ended.text
    closed = env.client.post(f"/api/v1/phases/{ended.json()['id']}/close", headers=organizer)
    assert closed.status_code == 200, closed.text
    link = env.client.post(f"/api/v1/users/{user_ids['other']}/reset-link", headers=env.admin)
    assert link.status_code == 200, link.text
    return FormWorld(env=env, world=world, user_ids=user_ids, ids={
        **world.ids, "draft_phase_id": draft.json()["id"], "closed_phase_id": ended.json()["id"],
        "reset_token": link.json()["link"].rsplit("/", 1)[1],
        "queued_submission_id": queued.json()["id"], "approval_competition_id": asked,
        "requester_id": user_ids["other"]})


def _approval_competition(env: InProcess, world: World) -> int:
    """A second competition of the organizer, by approval, where "other" asked to take part."""
    comp = env.competition(world.headers["organizer"])["id"]
    mode = env.client.put(f"/api/v1/competitions/{comp}/participation/mode",
                          headers=world.headers["organizer"], json={"mode": "approval"})
    asked = env.client.post(f"/api/v1/competitions/{comp}/participation",
                            headers=world.headers["other"])
    assert mode.status_code == 200 and asked.json()["status"] == "pending", asked.text
    return comp


# What an allowed post must have changed: observe(session, world, role) before and after, and
# effect(before, after) must hold.
Observe = Callable[[Session, FormWorld, str], object]


def session_tokens(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(ApiToken).where(
        ApiToken.user_id == fw.user_ids[role], ApiToken.kind == "session")).scalar_one()


def submissions_in_phase(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(Submission).where(
        Submission.user_id == fw.user_ids[role],
        Submission.phase_id == fw.ids["phase_id"])).scalar_one()


def submission_field(key: str, field: str) -> Observe:
    return lambda session, fw, role: getattr(session.get(Submission, fw.ids[key]), field)


def runs_of_finished(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(Run).where(
        Run.submission_id == fw.ids["submission_id"])).scalar_one()


def member_status(session: Session, fw: FormWorld, role: str) -> object:
    return session.execute(select(CompetitionMember.status).where(
        CompetitionMember.competition_id == fw.ids["approval_competition_id"],
        CompetitionMember.user_id == fw.ids["requester_id"])).scalar_one()


def api_tokens(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(ApiToken).where(
        ApiToken.user_id == fw.user_ids[role], ApiToken.kind == "api")).scalar_one()


def token_exists(session: Session, fw: FormWorld, role: str) -> bool:
    return session.get(ApiToken, fw.ids["token_id"]) is not None


def users_count(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(User)).scalar_one()


def others_password(session: Session, fw: FormWorld, role: str) -> object:
    return session.get(User, fw.user_ids["other"]).password_hash


def own_member_status(session: Session, fw: FormWorld, role: str) -> object:
    return session.execute(select(CompetitionMember.status).where(
        CompetitionMember.competition_id == fw.ids["approval_competition_id"],
        CompetitionMember.user_id == fw.user_ids[role])).scalar_one_or_none()


def own_team(session: Session, fw: FormWorld, role: str) -> object:
    return session.execute(select(TeamMember.team_id).where(
        TeamMember.competition_id == fw.ids["competition_id"],
        TeamMember.user_id == fw.user_ids[role])).scalar_one_or_none()


def mates_team(session: Session, fw: FormWorld, role: str) -> object:
    return session.execute(select(TeamMember.team_id).where(
        TeamMember.user_id == fw.ids["member_id"])).scalar_one_or_none()


def own_answers(session: Session, fw: FormWorld, role: str) -> object:
    return session.execute(select(FactsheetAnswer.answers).where(
        FactsheetAnswer.phase_id == fw.ids["phase_id"],
        FactsheetAnswer.user_id == fw.user_ids[role])).scalar_one_or_none()


def pools_of_competition(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(WorkerPool).where(
        WorkerPool.competition_id == fw.ids["competition_id"])).scalar_one()


def pool_credentials(session: Session, fw: FormWorld, role: str) -> int:
    return session.execute(select(func.count()).select_from(PoolCredential).where(
        PoolCredential.pool_id == fw.ids["pool_id"])).scalar_one()


def phase_pool(session: Session, fw: FormWorld, role: str) -> object:
    row = session.get(PoolPhase, fw.ids["phase_id"])
    return None if row is None else row.pool_id


def phase_status(key: str) -> Observe:
    return lambda session, fw, role: session.get(Phase, fw.ids[key]).status


@dataclass(frozen=True)
class Form:
    rule: str  # one letter per role in ROLES order: A allowed, D denied
    page: str  # the page that carries the form
    ids: dict[str, str]  # path parameter -> FormWorld.ids key
    observe: Observe
    effect: Callable[[object, object], bool]
    extra: Callable[[str], dict[str, str]] | None = None  # fields a person types, per role
    own: bool = False
    """Each allowed role's effect is its own (its sessions, tokens, submissions, answers,
    membership, password; a count it adds one to), so the allowed roles take turns on one
    world: each is observed just before and after its own post, as on a world of its own."""


def became(value: object) -> Callable[[object, object], bool]:
    return lambda before, after: before != value and after == value


def toggled(before: object, after: object) -> bool:
    return after == (not before)


FORMS: dict[tuple[str, str], Form] = {
    ("POST", "/login"): Form(SIGNED_IN, "/login", {}, session_tokens,
                             lambda before, after: after == before + 1, own=True),
    ("POST", "/logout"): Form(SIGNED_IN, "/my", {}, session_tokens,
                              lambda before, after: after == before - 1, own=True),
    ("POST", "/phases/{phase_id}/submit"): Form(
        SIGNED_IN, "/phases/{phase_id}/submit", {"phase_id": "phase_id"},
        submissions_in_phase, lambda before, after: after == before + 1, own=True),
    ("POST", "/submissions/{submission_id}/cancel"): Form(
        OWNER_OR_ORGANIZER, "/submissions/{submission_id}",
        {"submission_id": "queued_submission_id"},
        submission_field("queued_submission_id", "state"), became("cancelled")),
    ("POST", "/submissions/{submission_id}/select"): Form(
        OWNER_ONLY, "/submissions/{submission_id}", {"submission_id": "submission_id"},
        submission_field("submission_id", "is_selected"), toggled),
    ("POST", "/submissions/{submission_id}/rerun"): Form(
        ORGANIZER_OF_IT, "/submissions/{submission_id}", {"submission_id": "submission_id"},
        runs_of_finished, lambda before, after: after == before + 1),
    ("POST", "/submissions/{submission_id}/baseline"): Form(
        ORGANIZER_OF_IT, "/submissions/{submission_id}", {"submission_id": "submission_id"},
        submission_field("submission_id", "is_baseline"), toggled),
    ("POST", "/submissions/{submission_id}/disqualify"): Form(
        ORGANIZER_OF_IT, "/submissions/{submission_id}", {"submission_id": "submission_id"},
        submission_field("submission_id", "disqualified_at"),
        lambda before, after: before is None and after is not None,
        lambda role: {"reason": "used the test labels"}),
    ("POST", "/organizer/phases/{phase_id}/open"): Form(
        ORGANIZER_OF_IT, "/organizer", {"phase_id": "draft_phase_id"},
        phase_status("draft_phase_id"), became("open")),
    ("POST", "/organizer/phases/{phase_id}/close"): Form(
        ORGANIZER_OF_IT, "/organizer", {"phase_id": "phase_id"},
        phase_status("phase_id"), became("closed")),
    ("POST", "/organizer/phases/{phase_id}/publish"): Form(
        ORGANIZER_OF_IT, "/organizer", {"phase_id": "closed_phase_id"},
        lambda session, fw, role: (session.get(Phase, fw.ids["closed_phase_id"]).leaderboard
                                   or {}).get("published_at"),
        lambda before, after: before is None and after is not None),
    ("POST", "/organizer/competitions/{competition_id}/participants/{user_id}/approve"): Form(
        ORGANIZER_OF_IT, "/organizer",
        {"competition_id": "approval_competition_id", "user_id": "requester_id"},
        member_status, became("approved")),
    ("POST", "/organizer/competitions/{competition_id}/participants/{user_id}/deny"): Form(
        ORGANIZER_OF_IT, "/organizer",
        {"competition_id": "approval_competition_id", "user_id": "requester_id"},
        member_status, became("denied")),
    ("POST", "/signup"): Form(
        PUBLIC, "/signup", {}, users_count, lambda before, after: after == before + 1,
        lambda role: {"username": f"new-{role}", "email": f"{role}@example.org",
                      "password": "a long enough password"}, own=True),
    # Without a working mail server the answer is the same page, changing nothing that anyone
    # could tell apart (so it reveals no account): allowed for everyone, effect none.
    ("POST", "/forgot"): Form(PUBLIC, "/forgot", {}, lambda *_: None,
                              lambda before, after: True, lambda role: {"who": "nobody"},
                              own=True),
    ("POST", "/reset/{token}"): Form(
        PUBLIC, "/reset/{token}", {"token": "reset_token"}, others_password,
        lambda before, after: after != before, lambda role: {"password": "new pass phrase"}),
    ("POST", "/profile/tokens"): Form(SIGNED_IN, "/profile", {}, api_tokens,
                                      lambda before, after: after == before + 1,
                                      lambda role: {"name": "cluster"}, own=True),
    # In the approval competition: "other" asked already, its organizer and admins are in;
    # the page offers Request access to the rest, and only to them.
    ("POST", "/competitions/{competition_id}/join"): Form(
        "DADDAD", "/competitions/{competition_id}",
        {"competition_id": "approval_competition_id"}, own_member_status, became("pending"),
        own=True),
    ("POST", "/competitions/{competition_id}/cli-token"): Form(
        SIGNED_IN, "/competitions/{competition_id}", {"competition_id": "competition_id"},
        api_tokens, lambda before, after: after == before + 1, own=True),
    # Teams: the owner captains A (with a mate), "other" captains B, organizers and admins are
    # in none and may be in none (issue 33.13).
    ("POST", "/competitions/{competition_id}/team/create"): Form(
        "DDDDDD", "/competitions/{competition_id}/team", {"competition_id": "competition_id"},
        own_team, lambda before, after: before is None and after is not None,
        lambda role: {"name": f"team of {role}"}),
    ("POST", "/teams/join/{code}"): Form(
        "DDDDDD", "/teams/join/{code}", {"code": "code"}, own_team,
        lambda before, after: before is None and after is not None),
    ("POST", "/competitions/{competition_id}/team/leave"): Form(
        "DAADDD", "/competitions/{competition_id}/team", {"competition_id": "competition_id"},
        own_team, lambda before, after: before is not None and after is None, own=True),
    ("POST", "/competitions/{competition_id}/team/members/{member_id}/remove"): Form(
        OWNER_ONLY, "/competitions/{competition_id}/team",
        {"competition_id": "competition_id", "member_id": "member_id"}, mates_team,
        became(None)),
    ("POST", "/phases/{phase_id}/factsheet"): Form(
        SIGNED_IN, "/phases/{phase_id}/factsheet", {"phase_id": "phase_id"}, own_answers,
        became({"approach": "meta-learned"}), lambda role: {"q-approach": "meta-learned"},
        own=True),
    ("POST", "/profile/tokens/{token_id}/revoke"): Form(
        OWNER_ONLY, "/profile", {"token_id": "token_id"}, token_exists, became(False)),
    # Mail the verification link again (issue 33.12): only an account that waits for one,
    # and no account of this world does (404, nothing changes).
    ("POST", "/profile/verify-email"): Form("DDDDDD", "/profile", {}, lambda *_: None,
                                            lambda before, after: True),
    # One's own password (issue 33.1); this world's accounts have none yet: they set a first.
    ("POST", "/profile/password"): Form(
        SIGNED_IN, "/profile", {},
        lambda session, fw, role: session.get(User, fw.user_ids[role]).password_hash,
        lambda before, after: after != before,
        lambda role: {"current_password": "", "password": "a new long pass phrase",
                      "keep_tokens": "1"},  # the module's admin token must live on
        own=True),
    # Worker pools (issue 37): the competition's organizers and admins, on the pools pages.
    ("POST", "/organizer/competitions/{competition_id}/pools"): Form(
        ORGANIZER_OF_IT, "/organizer/pools", {"competition_id": "competition_id"},
        pools_of_competition, lambda before, after: after == before + 1,
        lambda role: {"name": f"web-{role}"}, own=True),
    ("POST", "/organizer/pools/{pool_id}/tokens"): Form(
        ORGANIZER_OF_IT, "/organizer/pools/{pool_id}", {"pool_id": "pool_id"},
        pool_credentials, lambda before, after: after == before + 1, own=True),
    ("POST", "/organizer/pools/{pool_id}/tokens/{credential_id}/revoke"): Form(
        ORGANIZER_OF_IT, "/organizer/pools/{pool_id}",
        {"pool_id": "pool_id", "credential_id": "credential_id"},
        lambda session, fw, role: session.get(PoolCredential, fw.ids["credential_id"]
                                              ).revoked_at,
        lambda before, after: before is None and after is not None),
    ("POST", "/organizer/phases/{phase_id}/pool"): Form(
        ORGANIZER_OF_IT, "/organizer/pools/{pool_id}",
        {"phase_id": "phase_id", "pool_id": "pool_id"}, phase_pool,
        lambda before, after: before is None and after is not None),
}
# Forms shown to everyone (anonymous included): "denied" there means no valid input.
ALWAYS_OFFERED = {("POST", "/login"), ("POST", "/signup"), ("POST", "/forgot"),
                  ("POST", "/reset/{token}")}


def form_routes(env: InProcess) -> list[tuple[str, str]]:
    """The app's state-changing page routes: every non-GET route outside /api and /internal."""
    return [(method, path) for method, path in app_routes(env.client.app)
            if method != "GET" and not path.startswith(("/api/", "/internal/"))]


def fill(template: str, form: Form, fw: FormWorld) -> str:
    return re.sub(r"{(\w+)}", lambda m: str(fw.ids[form.ids[m.group(1)]]), template)


FORM_TAG = re.compile(r'<form\b[^>]*\baction="([^"]*)"[^>]*>(.*?)</form>', re.S)
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def form_fields(page: str, action: str) -> dict[str, str] | None:
    """The hidden fields of the page's form that posts to `action`, or None if it has none."""
    for target, body in FORM_TAG.findall(page):
        if html.unescape(target) == action:
            return {name: html.unescape(value) for name, value in HIDDEN.findall(body)}
    return None


def browser(env: InProcess) -> TestClient:
    """A client of its own (its own cookie jar) on the running app."""
    return TestClient(env.client.app, follow_redirects=False)


def log_in(client: TestClient, token: str) -> None:
    fields = form_fields(client.get("/login").text, "/login")
    assert fields and fields.get("csrf_token"), "the login page carries no CSRF token"
    answer = client.post("/login", data={**fields, "token": token})
    # participants land on /my, staff on /organizer (issue 14)
    assert answer.status_code == 303 and answer.headers["location"] in ("/my", "/organizer"), \
        answer.text
    assert client.cookies.get("arena_session"), "login set no session cookie"


def attempt(fw: FormWorld, method: str, path: str, role: str, allowed: bool) -> list[str]:
    """Post the form as `role` with a valid token; the failures found (empty if none)."""
    env, form, cell = fw.env, FORMS[(method, path)], f"{method} {path} as {role}"
    client = browser(env)
    if role != "anonymous" and path != "/login":  # the public forms, signed in, too
        log_in(client, fw.token(role))
    url = fill(path, form, fw)
    fields = form_fields(client.get(fill(form.page, form, fw)).text, url)
    failures = []
    if fields is not None and path == "/login":
        fields["token"] = fw.token(role) or "not-a-token"
    elif (fields is not None) != allowed and (method, path) not in ALWAYS_OFFERED:
        failures.append(f"{cell}: the page {'offers' if fields else 'hides'} the form, "
                        f"but the rule says {'allowed' if allowed else 'denied'}")
    if fields is None:  # the session's token, from the logout form every signed-in page has
        fields = form_fields(client.get("/my").text, "/logout") or {"csrf_token": ""}
    fields |= form.extra(role) if form.extra else {}
    if role != "anonymous" and not fields.get("csrf_token"):
        return [*failures, f"{cell}: no CSRF token found for a signed-in role"]
    with env.db.session() as session:
        observed = form.observe(session, fw, role) if allowed else None
    before = None if allowed else snapshot(env)  # what a denial must leave as it was
    files = ({"file": ("s.zip", zip_bytes([("model.py", f"# {role}\n".encode())]),
                       "application/zip")} if path.endswith("/submit") else None)
    answer = client.post(url, data=fields, files=files)
    got = outcome(answer)
    said = f"{answer.status_code} {answer.text[:160]!r}"
    if got == "error":
        failures.append(f"{cell}: server error {said}")
    elif allowed:
        with env.db.session() as session:
            now = form.observe(session, fw, role)
        if got != "allowed":
            failures.append(f"{cell}: expected allowed, got {said}")
        elif not form.effect(observed, now):
            failures.append(f"{cell}: allowed ({said}) but no state change: "
                            f"{observed!r} -> {now!r}")
    else:
        if got != "denied":
            failures.append(f"{cell}: expected denied, got {said}")
        elif role != "anonymous" and "auth.csrf" in answer.text:
            failures.append(f"{cell}: denied by the CSRF check despite a valid token")
        changed = changed_tables(before, snapshot(env)) if before is not None else []
        if changed:
            failures.append(f"{cell}: denied ({answer.status_code}) but changed {changed}")
    return failures


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    # A mail server that refuses connections: /forgot offers its form and sends nothing.
    # Every role signs up from one address here: no per-address sign-up limit.
    with inprocess_app(tmp_path_factory.mktemp("authz-forms"), smtp_host="127.0.0.1",
                       smtp_port=9, signup_per_address_per_hour=0) as env:
        yield env


def test_every_form_route_has_a_rule_and_every_rule_a_route(app_env):
    served = set(form_routes(app_env))
    assert sorted(served - set(FORMS)) == [], "new form routes need a row in FORMS"
    assert sorted(set(FORMS) - served) == [], "rules for form routes that no longer exist"
    assert len(served) >= 9


def test_form_role_checks_hold_with_a_valid_csrf_token(app_env):
    failures, cells = [], 0
    shared = build_form_world(app_env)  # denials change nothing (checked), so they share one
    for method, path in form_routes(app_env):
        form = FORMS.get((method, path))
        if form is None:
            continue  # reported by the test above
        denied = [r for r, want in zip(ROLES, form.rule, strict=True) if want == "D"]
        for role in denied:
            failures += attempt(shared, method, path, role, allowed=False)
            cells += 1
        world: FormWorld | None = None  # a fresh one per allowed role, unless their effects
        for role in (r for r in ROLES if r not in denied):  # are each their own (Form.own)
            world = world if world is not None and form.own else build_form_world(app_env)
            failures += attempt(world, method, path, role, allowed=True)
            cells += 1
    assert cells == 6 * len(FORMS)
    assert failures == [], "\n".join(failures)
