"""Participation (issue 13 item 12): a competition is open to every participant (the default,
as before) or needs the organizers' approval, decided in the API, the dashboard and the CLI.
Before the fix, any participant could submit to any competition."""

from __future__ import annotations

import re

import pytest
from _server_support import zip_bytes
from fastapi.testclient import TestClient
from typer.testing import CliRunner


def _competition(env, organizer: dict, mode: str | None = None) -> tuple[int, int]:
    body = {"slug": f"c-{mode or 'default'}", "title": "C",
            "phases": [{"name": "dev", "status": "open", "protocol": {"name": "fixed"}}]}
    comp = env.client.post("/api/v1/competitions", headers=organizer, json=body).json()
    if mode:
        answer = env.client.put(f"/api/v1/competitions/{comp['id']}/participation/mode",
                                headers=organizer, json={"mode": mode})
        assert answer.status_code == 200, answer.text
    return comp["id"], comp["phases"][0]["id"]


def test_an_open_competition_takes_anyone_as_before(env):
    _, org = env.user("olga", role="organizer")
    _, ann = env.user("ann")
    comp_id, phase_id = _competition(env, org)
    assert env.submit(phase_id, ann).status_code == 201
    mine = env.client.get(f"/api/v1/competitions/{comp_id}/participation", headers=ann).json()
    assert (mine["mode"], mine["status"]) == ("open", "approved")


def test_approval_is_needed_and_a_denial_holds(env):
    _, org = env.user("olga", role="organizer")
    ann_row, ann = env.user("ann")
    comp_id, phase_id = _competition(env, org, "approval")

    refused = env.submit(phase_id, ann)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "participation.required"
    assert "arena join c-approval" in refused.json()["error"]["message"]

    asked = env.client.post(f"/api/v1/competitions/{comp_id}/participation", headers=ann)
    assert asked.json()["status"] == "pending"
    assert env.submit(phase_id, ann).status_code == 403  # still waiting
    listed = env.client.get(f"/api/v1/competitions/{comp_id}/participants", headers=org).json()
    assert [(m["username"], m["status"]) for m in listed] == [("ann", "pending")]

    url = f"/api/v1/competitions/{comp_id}/participants/{ann_row.id}"
    assert env.client.post(f"{url}/approve", headers=org).json()["status"] == "approved"
    assert env.submit(phase_id, ann).status_code == 201

    assert env.client.post(f"{url}/deny", headers=org).json()["status"] == "denied"
    assert env.submit(phase_id, ann).status_code == 403
    again = env.client.post(f"/api/v1/competitions/{comp_id}/participation", headers=ann)
    assert again.json()["status"] == "denied"  # asking again changes nothing
    assert env.submit(phase_id, org).status_code == 201  # the organizer's own baseline


def test_the_dashboard_approves_with_its_form(env):
    _, org = env.user("olga", role="organizer")
    ann_row, ann = env.user("ann")
    comp_id, phase_id = _competition(env, org, "approval")
    env.client.post(f"/api/v1/competitions/{comp_id}/participation", headers=ann)
    browser = TestClient(env.client.app, follow_redirects=False)
    login = browser.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', login).group(1)
    token = org["Authorization"].removeprefix("Bearer ")
    assert browser.post("/login", data={"csrf_token": csrf, "token": token}).status_code == 303
    page = browser.get("/organizer").text
    action = f"/organizer/competitions/{comp_id}/participants/{ann_row.id}/approve"
    assert action in page and "Participation requests" in page
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    done = browser.post(action, data={"csrf_token": csrf})
    assert done.status_code == 303 and done.headers["location"] == "/organizer?done=participation"
    assert env.submit(phase_id, ann).status_code == 201


@pytest.fixture
def cli(env, monkeypatch):
    """`arena` commands talking to the in-process app."""
    from starting_kit import cli as arena_cli
    from starting_kit.commands import remote_client

    monkeypatch.setattr(remote_client.ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    arena_cli._mount_plugins()
    runner = CliRunner()

    def run(headers: dict, *args: str) -> str:
        token = headers["Authorization"].removeprefix("Bearer ")
        result = runner.invoke(arena_cli.app, [*args, "--server", "http://t", "--token", token])
        assert result.exit_code == 0, result.output
        return result.output

    return run


def test_the_cli_asks_lists_approves_and_denies(env, cli):
    _, org = env.user("olga", role="organizer")
    ann_row, ann = env.user("ann")
    comp_id, phase_id = _competition(env, org)
    assert "approval" in cli(org, "participants", "mode", "c-default", "approval")
    assert "pending" in cli(ann, "join", "c-default")
    listing = cli(org, "participants", "list", "c-default")
    assert "username" in listing and "status" in listing  # a table with a header
    assert any("ann" in line and "pending" in line for line in listing.splitlines())
    assert "ann: approved" in cli(org, "participants", "approve", "c-default", "ann")
    assert env.submit(phase_id, ann).status_code == 201
    assert "ann: denied" in cli(org, "participants", "deny", "c-default", str(ann_row.id))
    assert env.submit(phase_id, ann, zip_bytes([("model.py", b"# 2\n")])).status_code == 403


BUNDLE = """slug: by-approval
title: By approval
participation: approval
phases:
  - name: dev
    status: open
"""


def test_the_mode_is_chosen_at_creation_in_json_or_a_bundle_and_shown(env):
    _, org = env.user("olga", role="organizer")
    _, ann = env.user("ann")
    made = env.client.post("/api/v1/competitions", headers=org, json={
        "slug": "json-approval", "title": "J", "participation": "approval",
        "phases": [{"name": "dev", "status": "open"}]}).json()
    assert made["participation"] == "approval"
    assert env.submit(made["phases"][0]["id"], ann).status_code == 403
    bundled = env.client.post("/api/v1/competitions/bundle", headers=org,
                              json={"yaml": BUNDLE})
    assert bundled.status_code == 201, bundled.text
    assert bundled.json()["participation"] == "approval"
    opened = env.client.patch(f"/api/v1/competitions/{made['id']}", headers=org,
                              json={"participation": "open"})
    assert opened.json()["participation"] == "open"
    assert env.submit(made["phases"][0]["id"], ann).status_code == 201
    listed = env.client.get("/api/v1/competitions", headers=ann).json()
    assert {c["slug"]: c["participation"] for c in listed} == {
        "json-approval": "open", "by-approval": "approval"}
