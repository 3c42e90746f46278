"""Bad bytes in forms (issue 33 item 10, accounts part): a non-ASCII CSRF token on /signup,
/login and /profile/tokens, or a non-ASCII invite code, was a 500 (`hmac.compare_digest` on a
non-ASCII str raises TypeError). Now every web form answers 4xx to a non-ASCII token, and to
NUL, control characters or bytes that are not UTF-8 in any field. Fails at a55d28d."""

from __future__ import annotations

import re

import pytest
from authz_world import build_world
from fastapi import routing
from inprocess_support import inprocess_app, zip_bytes

from server.core.security import csrf_token
from server.web.rendering import PageRoute

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("form-bytes")) as env:
        yield env


def web_forms(app) -> list[str]:
    """The path of every POST page route (every web form the app serves)."""
    return sorted({context.path for context in routing.iter_route_contexts(app.routes)
                   if isinstance(context.route, PageRoute) and "POST" in context.methods})


def _signed_in_cookie(env, world) -> None:
    """A web session for the world's owner, so forms get past the login check."""
    page = env.client.get("/login").text
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    token = world.headers["owner"]["Authorization"].split()[1]
    answer = env.client.post("/login", data={"csrf_token": nonce, "token": token},
                             follow_redirects=False)
    assert answer.status_code == 303, answer.text


@pytest.mark.parametrize("body", [
    "csrf_token=%C3%A9t%C3%A9&username=vic&password=x&name=laptop",  # non-ASCII token
    "csrf_token=%00&username=vic%00&password=x",  # NUL
    "csrf_token=ok&username=%FF%FE&name=%FF",  # not UTF-8
    "csrf_token=ok&username=a%1Bb&name=%07",  # control characters
])
def test_every_web_form_answers_4xx_to_bad_bytes(app_env, body):
    world = build_world(app_env)
    _signed_in_cookie(app_env, world)
    for path in ("/signup", "/login", "/forgot", "/profile", "/reset/x"):  # the form cookies
        app_env.client.get(path)
    forms = web_forms(app_env.client.app)
    assert {"/signup", "/login", "/profile/tokens", "/forgot", "/reset/{token}"} <= set(forms)
    failures = []
    for path in forms:
        url = re.sub(r"{(\w+)(:\w+)?}", lambda m: str(world.ids[m.group(1)]), path)
        answer = app_env.client.post(url, content=body, headers=FORM, follow_redirects=False)
        if not 400 <= answer.status_code < 500:
            failures.append(f"{path}: {answer.status_code} {answer.text[:100]!r}")
    assert failures == []
    app_env.client.cookies.clear()


def test_a_nul_in_a_field_is_named_in_a_clear_422(app_env):
    app_env.client.get("/login")
    answer = app_env.client.post("/login", content="csrf_token=x&username=v%00ic&password=p",
                                 headers=FORM | {"Accept": "text/html"})
    assert answer.status_code == 422, answer.text
    assert "username" in answer.text and "U+0000" in answer.text


def _multipart(token: str, name: bytes, value: bytes) -> bytes:
    part = b'--XX\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
    return (part % (b"csrf_token", token.encode()) + part % (name, value)
            + b'--XX\r\nContent-Disposition: form-data; name="file"; filename="s.zip"\r\n'
            b"Content-Type: application/zip\r\n\r\n" + zip_bytes() + b"\r\n--XX--\r\n")


@pytest.mark.parametrize(("name", "value"), [(b"note", b"a\x00b"), (b"method", b"ab\xff\xfe"),
                                             (b"m\xffx", b"v"), (b"note", b"\x1b[31m")])
def test_multipart_uploads_refuse_bad_bytes_in_their_text_fields(app_env, name, value):
    """The web submit form and the API upload stream their multipart bodies past the page
    check; their text fields are checked where they are parsed (a NUL reached Postgres, a
    non-UTF-8 field name was a 500)."""
    world = build_world(app_env)
    _signed_in_cookie(app_env, world)
    cookie = app_env.client.cookies.get("arena_session")
    token = csrf_token(app_env.settings.secret_key, cookie)
    kind = {"Content-Type": "multipart/form-data; boundary=XX"}
    for url, headers in ((f"/phases/{world.ids['phase_id']}/submit", kind),
                         (f"/api/v1/phases/{world.ids['phase_id']}/submissions",
                          kind | world.headers["owner"])):
        answer = app_env.client.post(url, content=_multipart(token, name, value),
                                     headers=headers, follow_redirects=False)
        assert answer.status_code == 422, (url, answer.status_code, answer.text[:300])
        assert "form.bad_bytes" in answer.text or "U+" in answer.text
    app_env.client.cookies.clear()


def test_a_non_ascii_invite_code_is_refused_not_a_500(app_env):
    app_env.settings.signup, app_env.settings.signup_invite_code = "invite", "neurips22"
    try:
        answer = app_env.client.post("/api/v1/auth/signup", json={
            "username": "ivy", "email": "ivy@uni.example.org", "password": "correct horse",
            "invite_code": "neurips22é"})
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "signup.bad_invite"
    finally:
        app_env.settings.signup, app_env.settings.signup_invite_code = "open", ""
