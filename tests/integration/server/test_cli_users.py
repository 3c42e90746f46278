"""`arena user create|list|revoke` (issue 14, item 10): an organizer creates a participant and
gets the exact login line to send, lists the accounts, and revokes one, whose token then stops
working; an organizer cannot revoke another organizer."""

from __future__ import annotations

import re

from test_cli_participant import _token, arena_cli  # noqa: F401 - the CLI fixture


def test_an_organizer_creates_lists_and_revokes_a_participant(env, arena_cli):  # noqa: F811
    _, staff = env.user("olga", role="organizer")
    code, out = arena_cli("user", "create", "ann", token=_token(staff))
    assert code == 0, out
    login = re.search(r"arena login --server \S+ --token (\S+)", out)
    assert login, out
    ann = {"Authorization": f"Bearer {login.group(1)}"}
    assert env.client.get("/api/v1/me", headers=ann).json()["username"] == "ann"

    code, out = arena_cli("user", "list", token=_token(staff))
    assert code == 0 and "ann" in out and "active" in out and "olga" not in out, out

    code, out = arena_cli("user", "revoke", "ann", token=_token(staff))
    assert code == 0 and "revoked ann" in out, out
    assert env.client.get("/api/v1/me", headers=ann).status_code == 401
    code, out = arena_cli("user", "list", token=_token(staff))
    assert "revoked" in out


def test_an_organizer_cannot_create_or_revoke_staff(env, arena_cli):  # noqa: F811
    _, staff = env.user("olga", role="organizer")
    env.user("oscar", role="organizer")
    code, out = arena_cli("user", "create", "eve", "--role", "admin", token=_token(staff))
    assert code == 1 and "participants only" in out
    code, out = arena_cli("user", "revoke", "oscar", token=_token(staff))
    assert code == 1 and "no account 'oscar' among those you manage" in out
