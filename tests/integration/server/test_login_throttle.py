"""Login throttling that slows a guesser without locking the owner out (issue 33 items 3, 4), on
SQLite and Postgres. At a55d28d the limit counted the unstripped name, so " vic", "vic " and
"vic\\t" went on guessing after the 429 (and "vic  " logged in); ten wrong guesses by anyone
locked the owner out from every address; and a wrong password cost an argon2 hash for a known
user only (1,199 ms against 60 ms), which told which usernames exist.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from server.services import passwords

SIGNUP = {"username": "vic", "email": "vic@uni.example.org", "password": "correct horse"}
RIGHT = {"username": "vic", "password": "correct horse"}


def from_address(env, address: str) -> TestClient:
    """A client of the same running app that connects from `address`."""
    return TestClient(env.client.app, client=(address, 40000))


def login(client: TestClient, username: str, password: str) -> int:
    return client.post("/api/v1/auth/token",
                       json={"username": username, "password": password}).status_code


@pytest.fixture
def vic(env):
    assert env.client.post("/api/v1/auth/signup", json=SIGNUP).status_code == 201
    return env


def test_spellings_of_one_name_share_one_count(vic):
    """After the 429 no spelling of the name gets another guess, nor logs in."""
    attacker = from_address(vic, "203.0.113.9")
    codes = [login(attacker, "vic", f"guess {i}") for i in range(4)]
    assert codes == [401, 401, 401, 429]
    for spelling in (" vic", "vic ", "vic\t", "VIC", "Vic", "ｖｉｃ", "vic\u200b", "v\u0456c"):
        assert login(attacker, spelling, "another guess") == 429, spelling
        assert login(attacker, spelling, "correct horse") == 429, spelling


def test_login_is_case_insensitive_for_every_letter(vic):
    """`name_key` folds case before its skeleton: "VIC" and "Vic" find "vic" (an "I" once
    turned into "l" before folding, so "VIC" and "vic" were two keys)."""
    for spelling in ("VIC", "Vic", "vIc"):
        assert login(from_address(vic, "192.0.2.77"), spelling, "correct horse") == 200


def test_backoff_doubles_per_failure_and_a_success_clears_it(vic):
    client = from_address(vic, "198.51.100.7")
    for i in range(6):  # typos an hour apart age out: the owner is never slowed
        vic.clock.advance(seconds=3600)
        assert login(client, "vic", f"typo {i}") == 401
    vic.clock.advance(seconds=3600)
    for i in range(3):
        assert login(client, "vic", f"typo again {i}") == 401
    delays = []
    for i in range(4):
        refused = client.post("/api/v1/auth/token", json={"username": "vic",
                                                          "password": f"x{i}"})
        assert refused.status_code == 429
        delays.append(int(refused.headers["Retry-After"]))
        vic.clock.advance(seconds=delays[-1])
        assert login(client, "vic", f"wrong {i}") == 401
    assert delays == [2, 3, 5, 9]  # 1, 2, 4, 8 s (+1 s of rounding up)
    vic.clock.advance(seconds=17)
    assert login(client, "vic", "correct horse") == 200
    assert login(client, "vic", "one typo") == 401  # the count started over


def test_a_guesser_elsewhere_does_not_lock_the_owner_out_of_their_own_address(vic):
    owner = from_address(vic, "192.0.2.10")
    assert login(owner, "vic", "correct horse") == 200  # the owner's address, now trusted
    for n in range(12):  # a guesser spread over twelve addresses, within the window
        attacker = from_address(vic, f"203.0.113.{n}")
        for i in range(3):
            login(attacker, "vic", f"guess {n}-{i}")
    assert login(from_address(vic, "203.0.113.200"), "vic", "correct horse") == 429
    assert login(owner, "vic", "correct horse") == 200
    assert login(vic.client, "vic", "correct horse") == 429  # an address never used: refused
    vic.clock.advance(seconds=vic.settings.login_window_s + 1)
    assert login(vic.client, "vic", "correct horse") == 200


def test_a_wrong_password_costs_one_argon2_verify_whether_or_not_the_user_exists(
        vic, monkeypatch):
    """The same work for unknown users: each wrong login verifies one argon2 hash (of the
    same parameters), so the answer's time does not tell which usernames exist."""
    calls: list[str] = []
    real = passwords.verify_password

    def counting(password: str, stored: str | None) -> bool:
        calls.append(stored or "")
        return real(password, stored)

    monkeypatch.setattr(passwords, "verify_password", counting)
    client = from_address(vic, "192.0.2.55")
    assert login(client, "vic", "wrong one") == 401
    assert login(client, "nobody-here", "wrong one") == 401
    assert len(calls) == 2
    known, unknown = calls
    assert known.startswith("$argon2id$") and unknown.startswith("$argon2id$")
    assert known.split("$")[2:4] == unknown.split("$")[2:4]  # same version and cost
