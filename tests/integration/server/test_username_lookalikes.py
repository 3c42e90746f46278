"""Usernames under the one name normalization (issue 33.8, services/names.py), through the
real routes on SQLite and Postgres: a look-alike of a taken username is refused at sign-up and
at creation by an admin, and a login finds the account under any form that normalizes to it."""

from __future__ import annotations

SIGNUP = {"email": "x@uni.example.org", "password": "correct horse"}


def signup(env, username: str, email: str = "x@uni.example.org"):
    return env.client.post("/api/v1/auth/signup",
                           json=SIGNUP | {"username": username, "email": email})


def test_a_lookalike_of_a_taken_username_is_refused_at_signup(env):
    assert signup(env, "ada_l", "ada@uni.example.org").status_code == 201
    for i, name in enumerate(("ada_I", "ＡＤＡ_L", "ADA_l")):
        refused = signup(env, name, f"other{i}@uni.example.org")
        assert refused.status_code == 409, (name, refused.text)
        assert refused.json()["error"]["code"] == "user.exists"
        assert "'ada_l'" in refused.json()["error"]["message"]


def test_an_admin_cannot_create_a_lookalike_account(env):
    _, admin = env.user("root", role="admin")
    made = env.client.post("/api/v1/users", headers=admin,
                           json={"username": "ada_l", "role": "participant"})
    assert made.status_code == 201, made.text
    for name in ("ada_I", "ADA_L", "ada_1"):  # capital i, capitals, digit one
        refused = env.client.post("/api/v1/users", headers=admin,
                                  json={"username": name, "role": "participant"})
        assert refused.status_code == 409, (name, refused.text)
        assert refused.json()["error"]["code"] == "user.exists"


def test_login_finds_the_account_under_its_normalized_name(env):
    assert signup(env, "ada_l").status_code == 201
    for typed in ("ada_l", "  ADA_L ", "ａｄａ_ｌ"):
        login = env.client.post("/api/v1/auth/token",
                                json={"username": typed, "password": "correct horse"})
        assert login.status_code == 200, (typed, login.text)
        assert login.json()["user"]["username"] == "ada_l"
