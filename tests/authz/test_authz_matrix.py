"""The authorization matrix: every route the app serves (generated from app.routes) x every role,
against an explicit table of expectations keyed by (method, path). A route without a rule fails
the test, so a new route cannot ship without someone deciding who may call it.

Roles: anonymous, the participant who owns the submission, another participant, the organizer of
the competition, the organizer of another competition, an admin. The roles a route that may
change state lets in are called on a fresh world of its own (the owner's submission finished,
the phase open); the GET routes, which read (the mailed verification link, a GET that writes,
refuses the world's made-up one), and the denials of every route share one world, built as the
others: a denial is checked to change nothing (every table and the queue as before its route's
denials), so that world stays as built. (A world per route was 134 worlds, the world being most
of the test's time; the GETs' one 76; the denials' one 39: the 38 routes that let no one in
build none.) Each answer is classified as
allowed, denied (401, 403, 404 — hiding counts as denying — or a redirect to the login page) or
a server error (never acceptable). Web-form POSTs are CSRF-protected: without the form's token
every role is denied (their role checks with a valid token: test_authz_forms.py).
"""

from __future__ import annotations

import pytest
from authz_world import (
    ROLES,
    World,
    app_routes,
    build_world,
    call,
    changed_tables,
    outcome,
    snapshot,
)
from inprocess_support import InProcess, inprocess_app

# One letter per role, in ROLES order: A allowed, D denied, * either (never a 5xx).
#            anonymous, owner, other, organizer, other_organizer, admin
PUBLIC, SIGNED_IN, STAFF, ADMIN = "AAAAAA", "DAAAAA", "DDDAAA", "DDDDDA"
OWNER_OR_ORGANIZER = "DADADA"  # the owner, the competition's organizer, admins
ORGANIZER_OF_IT = "DDDADA"
NOBODY = "DDDDDD"  # internal routes (run token only) and CSRF-protected forms without a token
EXPECTED: dict[tuple[str, str], str] = {
    ("GET", "/"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/static/{name}"): PUBLIC,
    ("GET", "/login"): PUBLIC,
    ("GET", "/competitions/{competition_id}"): PUBLIC,
    ("GET", "/phases/{phase_id}"): PUBLIC,
    ("GET", "/phases/{phase_id}/leaderboard"): PUBLIC,
    ("GET", "/phases/{phase_id}/submit"): SIGNED_IN,
    ("GET", "/my"): SIGNED_IN,
    ("GET", "/organizer"): STAFF,
    ("GET", "/submissions/{submission_id}"): OWNER_OR_ORGANIZER,
    ("GET", "/submissions/{submission_id}/runs/{run_index}/report"): OWNER_OR_ORGANIZER,
    ("POST", "/login"): NOBODY,
    ("POST", "/logout"): NOBODY,
    ("POST", "/phases/{phase_id}/submit"): NOBODY,
    ("POST", "/organizer/phases/{phase_id}/open"): NOBODY,
    ("POST", "/organizer/phases/{phase_id}/close"): NOBODY,
    ("POST", "/organizer/phases/{phase_id}/publish"): NOBODY,
    ("POST", "/submissions/{submission_id}/cancel"): NOBODY,
    ("POST", "/submissions/{submission_id}/select"): NOBODY,
    ("POST", "/submissions/{submission_id}/rerun"): NOBODY,
    ("POST", "/submissions/{submission_id}/baseline"): NOBODY,
    ("POST", "/submissions/{submission_id}/disqualify"): NOBODY,
    ("POST", "/api/v1/auth/token"): PUBLIC,
    ("POST", "/api/v1/users"): STAFF,
    ("GET", "/api/v1/users"): STAFF,  # organizers list the participants they manage
    # Organizers revoke participants they manage only (services/tenancy.py): `other` takes
    # part in the organizer's competition, not in the other organizer's.
    ("POST", "/api/v1/users/{user_id}/revoke"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/phases/{phase_id}/quota"): SIGNED_IN,
    ("GET", "/api/v1/me"): SIGNED_IN,
    ("GET", "/api/v1/competitions"): PUBLIC,
    ("POST", "/api/v1/competitions"): STAFF,
    ("GET", "/api/v1/competitions/{ref}"): PUBLIC,
    ("PATCH", "/api/v1/competitions/{competition_id}"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/competitions/{competition_id}/phases"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/competitions/bundle"): STAFF,
    ("PUT", "/api/v1/competitions/{ref}/bundle"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/competitions/{ref}/bundle/diff"): ORGANIZER_OF_IT,
    # 404 for its own organizer too: this competition was not built from a bundle.
    ("GET", "/api/v1/competitions/{ref}/bundle"): "DDD*D*",
    ("GET", "/api/v1/phases"): PUBLIC,
    ("GET", "/api/v1/phases/{phase_id}"): PUBLIC,
    ("PATCH", "/api/v1/phases/{phase_id}"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/phases/{phase_id}/close"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/phases/{phase_id}/rerun"): ORGANIZER_OF_IT,
    # The world's phase is open: its organizers get 409 (publish only a closed phase).
    ("POST", "/api/v1/phases/{phase_id}/publish"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/phases/{phase_id}/leaderboard"): PUBLIC,
    # The world's phase shows no statistics: only its organizers (and admins) compare, and
    # then only where per-task results exist.
    ("GET", "/api/v1/submissions/{submission_id}/compare/{other_submission_id}"): "DDD*D*",
    ("POST", "/api/v1/phases/{phase_id}/submissions"): SIGNED_IN,
    ("GET", "/api/v1/submissions/{submission_id}"): OWNER_OR_ORGANIZER,
    ("GET", "/api/v1/submissions/{submission_id}/logs"): OWNER_OR_ORGANIZER,
    ("GET", "/api/v1/submissions/{submission_id}/results"): OWNER_OR_ORGANIZER,
    ("GET", "/api/v1/submissions/{submission_id}/download"): OWNER_OR_ORGANIZER,
    ("POST", "/api/v1/submissions/{submission_id}/cancel"): OWNER_OR_ORGANIZER,
    ("POST", "/api/v1/submissions/{submission_id}/select"): "DADDDD",
    ("POST", "/api/v1/submissions/{submission_id}/rerun"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/submissions/{submission_id}/baseline"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/submissions/{submission_id}/disqualify"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/me/submissions"): SIGNED_IN,
    ("GET", "/api/v1/queue"): SIGNED_IN,  # participants see their own runs only
    ("GET", "/api/v1/admin/workers"): STAFF,
    ("GET", "/api/v1/admin/audit"): STAFF,  # organizers read their own entries
    ("GET", "/api/v1/datasets"): STAFF,
    ("POST", "/api/v1/datasets"): STAFF,
    ("POST", "/api/v1/datasets/from-path"): ADMIN,  # reads the server's filesystem
    ("POST", "/internal/runs/{run_id}/claim"): NOBODY,
    ("GET", "/internal/runs/{run_id}/submission"): NOBODY,
    ("POST", "/internal/runs/{run_id}/heartbeat"): NOBODY,
    ("POST", "/internal/runs/{run_id}/finish"): NOBODY,
    ("POST", "/internal/runs/{run_id}/release"): NOBODY,
    ("GET", "/internal/datasets/{content_hash}"): NOBODY,
    # Participation (issue 13 item 12): anyone signed in asks; the organizers of it decide.
    ("GET", "/api/v1/competitions/{competition_id}/participation"): SIGNED_IN,
    ("POST", "/api/v1/competitions/{competition_id}/participation"): SIGNED_IN,
    ("PUT", "/api/v1/competitions/{competition_id}/participation/mode"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/competitions/{competition_id}/participants"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/competitions/{competition_id}/participants/{user_id}/approve"):
        ORGANIZER_OF_IT,
    ("POST", "/api/v1/competitions/{competition_id}/participants/{user_id}/deny"):
        ORGANIZER_OF_IT,
    ("POST", "/organizer/competitions/{competition_id}/participants/{user_id}/approve"): NOBODY,
    ("POST", "/organizer/competitions/{competition_id}/participants/{user_id}/deny"): NOBODY,
    # The Worker pools pages (issue 37): staff see the list (their own competitions' pools);
    # a pool's page is its competition's organizers' and admins'; its forms need a CSRF token.
    ("GET", "/organizer/pools"): STAFF,
    ("GET", "/organizer/pools/{pool_id}"): ORGANIZER_OF_IT,
    ("POST", "/organizer/competitions/{competition_id}/pools"): NOBODY,
    ("POST", "/organizer/pools/{pool_id}/tokens"): NOBODY,
    ("POST", "/organizer/pools/{pool_id}/tokens/{credential_id}/revoke"): NOBODY,
    ("POST", "/organizer/phases/{phase_id}/pool"): NOBODY,
    # Accounts (issue 23 item 1): sign-up and reset are for anyone; tokens are one's own.
    ("GET", "/signup"): PUBLIC,
    ("POST", "/signup"): NOBODY,
    ("GET", "/forgot"): PUBLIC,
    ("POST", "/forgot"): NOBODY,
    ("GET", "/reset/{token}"): NOBODY,  # the world's link is no link: 404 for everyone
    ("POST", "/reset/{token}"): NOBODY,
    ("GET", "/profile"): SIGNED_IN,
    ("POST", "/profile/tokens"): NOBODY,
    ("POST", "/profile/tokens/{token_id}/revoke"): NOBODY,
    ("POST", "/competitions/{competition_id}/join"): NOBODY,
    ("POST", "/competitions/{competition_id}/cli-token"): NOBODY,
    # Teams (issue 23 item 3): the owner captains team A (with a mate), "other" captains B;
    # the organizers are in no team. One team per person: who has one cannot make or join
    # another; only A's captain removes A's members; a member of B cannot act for A.
    ("GET", "/competitions/{competition_id}/team"): SIGNED_IN,
    ("GET", "/teams/join/{code}"): SIGNED_IN,
    ("POST", "/competitions/{competition_id}/team/create"): NOBODY,
    ("POST", "/competitions/{competition_id}/team/leave"): NOBODY,
    ("POST", "/competitions/{competition_id}/team/members/{member_id}/remove"): NOBODY,
    ("POST", "/teams/join/{code}"): NOBODY,
    ("GET", "/api/v1/competitions/{competition_id}/teams"): SIGNED_IN,
    ("GET", "/api/v1/competitions/{competition_id}/team"): "DAADDD",
    # Organizers and admins are in no participant team (issue 33.13; test_authz_teams.py)
    ("POST", "/api/v1/competitions/{competition_id}/teams"): NOBODY,
    ("POST", "/api/v1/competitions/{competition_id}/teams/join"): NOBODY,
    ("POST", "/api/v1/competitions/{competition_id}/team/leave"): "DAADDD",
    ("DELETE", "/api/v1/teams/{team_id}/members/{member_id}"): "DADDDD",
    # Fact sheets (issue 23 item 4): participants of the competition answer; its organizers
    # export (another competition's organizer sees nothing).
    ("GET", "/phases/{phase_id}/factsheet"): SIGNED_IN,
    ("POST", "/phases/{phase_id}/factsheet"): NOBODY,
    ("GET", "/api/v1/phases/{phase_id}/factsheet"): SIGNED_IN,
    ("PUT", "/api/v1/phases/{phase_id}/factsheet"): SIGNED_IN,
    ("GET", "/api/v1/phases/{phase_id}/factsheet/answers"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/auth/signup"): PUBLIC,
    ("GET", "/api/v1/me/tokens"): SIGNED_IN,
    ("POST", "/api/v1/me/tokens"): SIGNED_IN,
    ("DELETE", "/api/v1/me/tokens/{token_id}"): "DADDDD",  # the owner's token: only theirs
    # A reset link takes the account over: organizers only for participants they created
    # (issue 33.1; `other` signed up via the admin and takes part in this competition).
    ("POST", "/api/v1/users/{user_id}/reset-link"): ADMIN,
    # E-mail verification (issue 33.12): the world's link is no link (404); the resend form
    # is CSRF-protected.
    ("GET", "/verify-email/{user_id}/{token}"): NOBODY,
    ("POST", "/profile/verify-email"): NOBODY,
    ("POST", "/api/v1/me/password"): SIGNED_IN,  # one's own (an empty body: 422 once signed in)
    ("POST", "/profile/password"): NOBODY,
    # The starting kit and sample data (issue 32.4): public downloads of a public competition;
    # the world's competition serves no sample data (404 to all). Kit files: its organizers
    # and admins get past the role checks to the name check (the world's name is no kit
    # file: 404), the others are refused before it.
    ("GET", "/kit/starting_kit.zip"): PUBLIC,
    ("GET", "/competitions/{competition_id}/kit/starting_kit.zip"): PUBLIC,
    ("GET", "/competitions/{competition_id}/kit/sample_data.tar"): NOBODY,
    ("POST", "/api/v1/competitions/{competition_id}/kit/{name}"): "DDD*D*",
    # Worker pools (issue 37): the competition's organizers (and admins) only; the operator
    # lists them all; the job route takes a pool credential, never a user's token.
    ("POST", "/api/v1/competitions/{competition_id}/pools"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/competitions/{competition_id}/pools"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/pools/{pool_id}"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/pools/{pool_id}/tokens"): ORGANIZER_OF_IT,
    ("POST", "/api/v1/pools/{pool_id}/tokens/{credential_id}/revoke"): ORGANIZER_OF_IT,
    ("PUT", "/api/v1/phases/{phase_id}/pool"): ORGANIZER_OF_IT,
    ("GET", "/api/v1/admin/pools"): ADMIN,
    ("POST", "/internal/pool/jobs"): NOBODY,
}


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("authz")) as env:
        yield env


def served_routes(env: InProcess) -> list[tuple[str, str]]:
    return app_routes(env.client.app)


def test_every_route_has_a_rule_and_every_rule_a_route(app_env):
    served = set(served_routes(app_env))
    assert sorted(served - set(EXPECTED)) == [], "new routes need a row in EXPECTED"
    assert sorted(set(EXPECTED) - served) == [], "rules for routes that no longer exist"


def check(world: World, method: str, path: str, role: str, want: str) -> list[str]:
    """Call the route as `role`; the failure found (none if its answer is as the rule says)."""
    answer = call(world, method, path, role)
    got = outcome(answer)
    if got == "error" or (want != "*" and got != {"A": "allowed", "D": "denied"}[want]):
        return [f"{method} {path} as {role}: expected {want}, got "
                f"{answer.status_code} {answer.text[:120]!r}"]
    return []


def test_the_matrix_holds_for_every_route_and_role(app_env):
    failures, cells = [], 0
    shared = build_world(app_env)  # the GET routes' and every denial's: they change nothing
    for method, path in served_routes(app_env):
        rule = EXPECTED.get((method, path))
        if rule is None:
            continue  # reported by the test above
        wants = dict(zip(ROLES, rule, strict=True))
        # A route that may change state: its denials on the shared world, checked to leave
        # every table and the queue as they were; then the roles it may let in, in order, on
        # a fresh world of the route's own.
        denied = [] if method == "GET" else [r for r in ROLES if wants[r] == "D"]
        before = snapshot(app_env) if denied else None
        for role in denied:
            failures += check(shared, method, path, role, wants[role])
        if before is not None and (changed := changed_tables(before, snapshot(app_env))):
            failures.append(f"{method} {path}: denied to {', '.join(denied)} but changed "
                            f"{changed}")
        rest = [r for r in ROLES if r not in denied]
        world = shared if method == "GET" or not rest else build_world(app_env)
        for role in rest:
            failures += check(world, method, path, role, wants[role])
        cells += len(denied) + len(rest)
    assert cells >= 6 * 60
    assert failures == []


def test_a_run_token_opens_only_its_own_run(app_env):
    world = build_world(app_env)
    other_run, token = next((r, t) for r, t, _ in reversed(app_env.queue.jobs)
                            if r != world.ids["run_id"])
    for path in ("/internal/runs/{}/claim", "/internal/runs/{}/heartbeat",
                 "/internal/runs/{}/finish", "/internal/runs/{}/release"):
        answer = app_env.client.post(path.format(world.ids["run_id"]), json={},
                                     headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 401, (path, other_run, answer.text)
    answer = app_env.client.get(f"/internal/runs/{world.ids['run_id']}/submission",
                                headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
