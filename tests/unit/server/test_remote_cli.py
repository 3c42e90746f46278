"""The participant CLI's client side: stored credentials, clear errors, no server needed."""

from __future__ import annotations

import stat

import httpx
import pytest

from starting_kit.commands.remote_client import (
    ArenaClient,
    RemoteError,
    load_credentials,
    save_credentials,
)


def client_answering(handler) -> ArenaClient:
    http = httpx.Client(base_url="http://arena.test", transport=httpx.MockTransport(handler))
    return ArenaClient(http, "tok")


def test_credentials_are_private_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    path = save_credentials("http://arena.test/", "secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_credentials(None, None) == ("http://arena.test", "secret")
    assert load_credentials("http://other", None) == ("http://other", "secret")


def test_missing_credentials_say_how_to_log_in(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(RemoteError, match="arena login"):
        load_credentials(None, None)


def test_server_down_is_explained():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(RemoteError, match="cannot reach the server"):
        client_answering(refuse).get("/api/v1/me")


@pytest.mark.parametrize(("status", "code", "hint"), [
    (401, "auth.required", "arena login"), (429, "quota.per_day", "quota reached: 2 of 2")])
def test_refusals_carry_the_servers_code_and_message(status, code, hint):
    message = "quota reached: 2 of 2 submissions per UTC day" if status == 429 else "bad token"

    def answer(_request):
        return httpx.Response(status, json={"error": {"code": code, "message": message}})

    with pytest.raises(RemoteError) as caught:
        client_answering(answer).post("/api/v1/phases/1/submissions")
    assert code in str(caught.value) and hint in str(caught.value)


def test_bundle_errors_are_listed_with_their_lines():
    errors = [{"line": 7, "where": "phases[0].quotas.per_day", "message": "must be >= 0"}]

    def answer(_request):
        return httpx.Response(422, json={"error": {"code": "bundle.invalid", "message": "bad",
                                                   "details": {"errors": errors}}})

    with pytest.raises(RemoteError, match=r"7: phases\[0\].quotas.per_day: must be >= 0"):
        client_answering(answer).post("/api/v1/competitions/bundle")
