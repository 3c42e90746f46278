"""Web pages: token login sets a safe cookie; the submit form needs its CSRF token."""

from __future__ import annotations

import re

from _server_support import zip_bytes
from sqlalchemy import func, select

from server.models import Submission


def login(env, headers) -> str:
    token = headers["Authorization"].split()[1]
    answer = env.client.post("/login", data={"token": token}, follow_redirects=False)
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    page = env.client.get(f"/phases/{env.phase_id}/submit")
    return re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text).group(1)


def post_form(env, csrf: str | None):
    data = {"csrf_token": csrf} if csrf else {}
    return env.client.post(f"/phases/{env.phase_id}/submit", data=data, follow_redirects=False,
                           files={"file": ("s.zip", zip_bytes(), "application/zip")})


def count(env) -> int:
    with env.db.session() as s:
        return s.execute(select(func.count(Submission.id))).scalar_one()


def test_login_submit_and_see_the_submission_page(env):
    env.phase_id = env.phase(hide_logs=False).id
    _, headers = env.user("ann")
    csrf = login(env, headers)
    answer = post_form(env, csrf)
    assert answer.status_code == 303, answer.text
    page = env.client.get(answer.headers["location"])
    assert page.status_code == 200 and "queued" in page.text
    assert "ann" in env.client.get("/my").text
    assert env.client.get(f"/phases/{env.phase_id}/leaderboard").status_code == 200


def test_submit_form_without_the_right_csrf_token_registers_nothing(env):
    env.phase_id = env.phase().id
    _, headers = env.user("ann")
    login(env, headers)
    assert post_form(env, None).status_code == 403
    assert post_form(env, "0" * 64).status_code == 403
    assert count(env) == 0
    assert not list((env.settings.storage / "tmp").iterdir())


def test_cookie_alone_cannot_change_state_through_the_api(env):
    env.phase_id = env.phase().id
    _, headers = env.user("ann")
    login(env, headers)
    answer = env.client.post(f"/api/v1/phases/{env.phase_id}/submissions",
                             files={"file": ("s.zip", zip_bytes(), "application/zip")})
    assert answer.status_code == 401
    assert count(env) == 0


def test_bad_login_token_is_refused(env):
    answer = env.client.post("/login", data={"token": "nope"})
    assert answer.status_code == 401 and "Unknown" in answer.text
