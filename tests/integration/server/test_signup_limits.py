"""Open sign-up with limits (issue 33 item 12). At a55d28d one address made 30 accounts in 33 s,
each with its own quota, and duplicate e-mail addresses were accepted. Now: a few accounts per
client address an hour (Settings.signup_per_address_per_hour), one account per e-mail address
(normalized; a unique column, migration 0012, which keeps old duplicates working), and, where
the server sends mail, an address verified by a mailed link before the account takes part."""

from __future__ import annotations

import re
import uuid

import sqlalchemy
from fastapi.testclient import TestClient
from test_accounts import SmtpSink

from server.core.db import upgrade_database


def signup(client, name: str, email: str | None = None):
    return client.post("/api/v1/auth/signup", json={
        "username": name, "email": email or f"{name}@uni.example.org",
        "password": "correct horse"})


def from_address(env, address: str) -> TestClient:
    return TestClient(env.client.app, client=(address, 40000))


def test_one_address_signs_up_a_few_accounts_an_hour(env):
    env.settings.signup_per_address_per_hour = 3
    spammer = from_address(env, "203.0.113.5")
    codes = [signup(spammer, f"bot{i}").status_code for i in range(4)]
    assert codes == [201, 201, 201, 429]
    refused = signup(spammer, "bot9")
    assert refused.status_code == 429 and 0 < int(refused.headers["Retry-After"]) <= 3601
    assert "wait" in refused.json()["error"]["message"]
    assert signup(from_address(env, "198.51.100.1"), "neighbour").status_code == 201
    env.clock.advance(seconds=3601)
    assert signup(spammer, "bot10").status_code == 201


def test_the_web_form_counts_the_same(env):
    env.settings.signup_per_address_per_hour = 1
    client = from_address(env, "203.0.113.77")
    codes = []
    for name in ("webby1", "webby2"):
        client.cookies.clear()
        nonce = re.search(r'name="csrf_token" value="([^"]+)"',
                          client.get("/signup").text).group(1)
        codes.append(client.post("/signup", follow_redirects=False, data={
            "csrf_token": nonce, "username": name, "email": f"{name}@uni.example.org",
            "password": "correct horse"}).status_code)
    assert codes == [303, 429]


def test_one_account_per_email_address_whatever_its_case(env):
    assert signup(env.client, "ada", "ada@uni.example.org").status_code == 201
    for variant in ("ada@uni.example.org", "ADA@Uni.Example.ORG", " ada@uni.example.org "):
        again = signup(env.client, f"ada{uuid.uuid4().hex[:4]}", variant)
        assert again.status_code == 409, again.text
        assert again.json()["error"]["code"] == "user.email_taken"
    _, admin = env.user("root", role="admin")
    made = env.client.post("/api/v1/users", headers=admin,
                           json={"username": "ada2", "email": "Ada@uni.example.org"})
    assert made.status_code == 409 and made.json()["error"]["code"] == "user.email_taken"
    nul = env.client.post("/api/v1/users", headers=admin,  # Postgres cannot store a NUL
                          json={"username": "ada3", "email": "ada\u0000@uni.example.org"})
    assert nul.status_code == 422 and nul.json()["error"]["code"] == "signup.bad_email", nul.text


def test_with_smtp_an_account_verifies_its_address_before_taking_part(env):
    sink = SmtpSink()
    env.settings.smtp_host, env.settings.smtp_port = "127.0.0.1", sink.port
    made = signup(env.client, "newbie")
    assert made.status_code == 201, made.text
    bearer = {"Authorization": f"Bearer {made.json()['token']}"}
    phase = env.phase()
    refused = env.submit(phase.id, bearer)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "account.unverified"
    assert len(sink.messages) == 1 and "To: newbie@uni.example.org" in sink.messages[0]
    link = re.search(r"http://\S+(/verify-email/\d+/[0-9a-f]+)", sink.messages[0]).group(1)
    assert env.client.get(link[:-4] + "0000").status_code == 404  # a wrong link
    opened = env.client.get(link)
    assert opened.status_code == 200 and "verified" in opened.text
    assert env.submit(phase.id, bearer).status_code == 201


def test_the_upgrade_keeps_old_duplicate_addresses_working(tmp_path):
    """Two accounts of one address from before 0012: the first gets the key, the second keeps
    its address without one (it still logs in), and no third account may take it."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade_database(url, "0011")
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        for i, email in enumerate(("ada@uni.example.org", "ADA@uni.example.org")):
            conn.exec_driver_sql(
                "INSERT INTO users (username, name_key, email, role, is_active, created_at) "
                f"VALUES ('ada{i}', 'ada{i}', '{email}', 'participant', 1, "
                "'2030-01-01 00:00:00')")
    upgrade_database(url)
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT username, email, email_key FROM users ORDER BY id").all()
    engine.dispose()
    assert rows == [("ada0", "ada@uni.example.org", "ada@uni.example.org"),
                    ("ada1", "ADA@uni.example.org", None)]
