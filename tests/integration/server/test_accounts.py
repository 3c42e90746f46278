"""Accounts people make themselves (issue 23 item 1), through the real routes on SQLite and
Postgres: sign-up under each platform setting, password login (API and web) rate-limited,
web sessions that are not API tokens, own tokens by name, and one-time reset links."""

from __future__ import annotations

import re

import pytest

SIGNUP = {"username": "ada", "email": "ada@uni.example.org", "password": "correct horse"}


def signup(env, **fields):
    return env.client.post("/api/v1/auth/signup", json=SIGNUP | fields)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_open_signup_makes_a_participant_with_a_token_and_a_hashed_password(env):
    made = signup(env)
    assert made.status_code == 201, made.text
    me = env.client.get("/api/v1/me", headers=bearer(made.json()["token"])).json()
    assert me["username"] == "ada" and me["role"] == "participant"
    with env.db.session() as s:
        from sqlalchemy import select

        from server.models import User
        stored = s.execute(select(User.password_hash).where(User.username == "ada")).scalar()
    assert stored.startswith("$argon2") and "correct horse" not in stored
    login = env.client.post("/api/v1/auth/token",
                            json={"username": "ada", "password": "correct horse"})
    assert login.status_code == 200, login.text


@pytest.mark.parametrize(("setting", "fields", "code"), [
    ({"signup": "off"}, {}, "signup.off"),
    ({"signup": "invite", "signup_invite_code": "neurips22"}, {"invite_code": "guess"},
     "signup.bad_invite"),
    ({"signup": "domains", "signup_email_domains": ["uni.example.org"]},
     {"email": "ada@gmail.example.com"}, "signup.domain"),
])
def test_the_signup_setting_refuses_who_it_should(env, setting, fields, code):
    for key, value in setting.items():
        setattr(env.settings, key, value)
    refused = signup(env, **fields)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == code, refused.text
    if setting["signup"] != "off":  # the right code / domain gets in
        good = {"invite_code": "neurips22"} if setting["signup"] == "invite" else {}
        assert signup(env, **good).status_code == 201


@pytest.mark.parametrize(("fields", "code"), [
    ({"username": "a b"}, "signup.bad_username"),
    ({"email": "not-an-address"}, "signup.bad_email"),
    ({"password": "short"}, "signup.bad_password"),
])
def test_bad_signup_input_says_what_is_wrong(env, fields, code):
    answer = signup(env, **fields)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == code, answer.text


def test_a_taken_username_is_refused_whatever_its_case(env):
    assert signup(env).status_code == 201
    again = signup(env, username="ADA", email="other@uni.example.org")
    assert again.status_code == 409 and again.json()["error"]["code"] == "user.exists"


def test_failed_logins_are_rate_limited_per_account(env):
    env.settings.login_attempts_per_window = 3
    assert signup(env).status_code == 201
    wrong = {"username": "ada", "password": "wrong password"}
    codes = [env.client.post("/api/v1/auth/token", json=wrong).status_code for _ in range(4)]
    assert codes == [401, 401, 401, 429]
    right = env.client.post("/api/v1/auth/token",
                            json={"username": "ada", "password": "correct horse"})
    assert right.status_code == 429 and "Retry-After" in right.headers  # even the right one
    env.clock.advance(seconds=env.settings.login_window_s + 1)
    assert env.client.post("/api/v1/auth/token", json={
        "username": "ada", "password": "correct horse"}).status_code == 200


def web_login(env, username: str, password: str):
    page = env.client.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    return env.client.post("/login", data={"csrf_token": csrf, "username": username,
                                           "password": password}, follow_redirects=False)


def test_web_password_login_opens_a_session_that_is_not_an_api_token(env):
    token = signup(env).json()["token"]
    answer = web_login(env, "ada", "correct horse")
    assert answer.status_code == 303 and answer.headers["location"] == "/my", answer.text
    cookie = env.client.cookies.get("arena_session")
    assert cookie
    # the session cookie works for pages, never as a bearer token, and is not listed
    assert env.client.get("/my").status_code == 200
    env.client.cookies.clear()
    assert env.client.get("/api/v1/me", headers=bearer(cookie)).status_code == 401
    listed = env.client.get("/api/v1/me/tokens", headers=bearer(token)).json()
    assert [t["name"] for t in listed] == ["signup"]
    _, admin = env.user("root", role="admin")
    accounts = env.client.get("/api/v1/users", headers=admin).json()
    assert next(a["tokens"] for a in accounts if a["username"] == "ada") == 1  # not sessions


def test_web_login_with_a_wrong_password_says_so(env):
    signup(env)
    answer = web_login(env, "ada", "nope")
    assert answer.status_code == 401 and "wrong password" in answer.text


def test_own_tokens_are_created_once_listed_by_name_and_revoked(env):
    token = signup(env).json()["token"]
    made = env.client.post("/api/v1/me/tokens", headers=bearer(token), json={"name": "laptop"})
    assert made.status_code == 201, made.text
    laptop = made.json()
    assert env.client.get("/api/v1/me", headers=bearer(laptop["token"])).status_code == 200
    names = [t["name"] for t in env.client.get("/api/v1/me/tokens", headers=bearer(token)).json()]
    assert names == ["signup", "laptop"] and "token" not in str(
        env.client.get("/api/v1/me/tokens", headers=bearer(token)).json()[1].keys())
    _, other = env.user("bob")
    assert env.client.delete(f"/api/v1/me/tokens/{laptop['id']}", headers=other
                             ).status_code == 404  # not bob's
    assert env.client.delete(f"/api/v1/me/tokens/{laptop['id']}", headers=bearer(token)
                             ).status_code == 204
    assert env.client.get("/api/v1/me", headers=bearer(laptop["token"])).status_code == 401


def test_a_reset_link_sets_a_new_password_once_and_ends_web_sessions(env):
    signup(env)
    # An account that signed up itself is reset by an admin (or by mail), never by an
    # organizer it merely takes part with (issue 33.1: tests/authz/test_account_takeover.py).
    _, admin = env.user("root", role="admin")
    ada = env.client.get("/api/v1/users", headers=admin).json()
    ada_id = next(u["id"] for u in ada if u["username"] == "ada")
    link = env.client.post(f"/api/v1/users/{ada_id}/reset-link", headers=admin)
    assert link.status_code == 200, link.text
    path = "/" + link.json()["link"].split("/", 3)[3]
    assert web_login(env, "ada", "correct horse").status_code == 303  # a session to end
    page = env.client.get(path)
    assert page.status_code == 200 and "Choose a new password" in page.text
    csrf = re.search(r'action="/reset/[^"]+">\s*<input type="hidden" name="csrf_token" '
                     r'value="([^"]+)"', page.text).group(1)
    done = env.client.post(path, data={"csrf_token": csrf, "password": "new battery staple"},
                           follow_redirects=False)
    assert done.status_code == 200 and "Your new password is set" in done.text
    assert env.client.get("/my", follow_redirects=False).status_code == 303  # logged out
    assert env.client.post("/api/v1/auth/token", json={
        "username": "ada", "password": "new battery staple"}).status_code == 200
    assert env.client.get(path).status_code == 404  # used once


def test_an_organizer_cannot_reset_an_organizer(env):
    _, organizer = env.user("olga", role="organizer")
    other, _ = env.user("oscar", role="organizer")
    answer = env.client.post(f"/api/v1/users/{other.id}/reset-link", headers=organizer)
    assert answer.status_code == 403, answer.text


class SmtpSink:
    """A local SMTP server that keeps what it is sent (just enough of RFC 5321 for smtplib)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.messages: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:  # one connection per mail
            conn, _ = self.sock.accept()
            self._session(conn)

    def _session(self, conn) -> None:
        with conn, conn.makefile("rb") as lines:
            conn.sendall(b"220 sink\r\n")
            while line := lines.readline():
                verb = line[:4].upper()
                if verb == b"DATA":
                    conn.sendall(b"354 go\r\n")
                    body = []
                    while (part := lines.readline()) not in (b".\r\n", b""):
                        body.append(part.decode())
                    self.messages.append("".join(body))
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                conn.sendall(b"250 ok\r\n")


def test_forgot_password_mails_a_one_time_link_when_smtp_is_configured(env):
    sink = SmtpSink()
    env.settings.smtp_host, env.settings.smtp_port = "127.0.0.1", sink.port
    signup(env)
    page = env.client.get("/forgot").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer = env.client.post("/forgot", data={"csrf_token": csrf, "who": "ada@uni.example.org"})
    assert answer.status_code == 200 and "on its way" in answer.text
    # the first mail verifies the address (issue 33.12); the second holds the reset link
    assert len(sink.messages) == 2 and "To: ada@uni.example.org" in sink.messages[1]
    link = re.search(r"http://\S+/reset/(\S+)", sink.messages[1])
    assert link, sink.messages[1]
    assert env.client.get(f"/reset/{link.group(1)}").status_code == 200
