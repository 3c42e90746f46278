"""Tenancy as one rule (issue 20, D1–D3): a second organizer, with a competition of their own,
tries to run code on the first one's private data, to read their drafts, seeds and dataset
hashes, and to list and revoke their participants. Each test fails on 08e9140.

- D1: every path that starts runs checks the data of the phase the runs would use, whatever
  its status: a draft phase may not name another organizer's registered dataset, and a hash
  named while unregistered (then registered by its owner) stops the close that would carry
  into that phase and the re-run that would run there.
- D2: drafts, seeds, split seeds and dataset hashes of a competition are for its organizers
  only, on the API (one phase, lists) and the pages.
- D3: an organizer lists and revokes only the accounts they created or that take part in a
  competition they organize.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from authz_world import World, build_world, call, finish_run, outcome
from inprocess_support import inprocess_app, zip_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compiled_entries import compiled_entry_tar  # noqa: E402


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("authz-tenancy")) as env:
        yield env


@pytest.fixture
def world(app_env) -> World:
    world = build_world(app_env)
    comp_id = world.ids["competition_id"]
    draft = app_env.client.post(
        f"/api/v1/competitions/{comp_id}/phases", headers=world.headers["organizer"],
        json={"name": f"final-{uuid.uuid4().hex[:6]}", "status": "draft", "seed": 987654321,
              "protocol": {"name": "within-domain", "split_seed": 4242}})
    assert draft.status_code == 201, draft.text
    world.ids["draft_phase_id"] = draft.json()["id"]
    return world


def _register(world: World, actor: str, seed: int) -> dict:
    digest, tar = compiled_entry_tar(seed=seed)
    answer = world.env.client.post("/api/v1/datasets", headers=world.headers[actor],
                                   files={"file": ("d.tar", tar, "application/x-tar")})
    assert answer.status_code == 201, answer.text
    return {"name": "D1", "content_hash": digest}


def _unregistered(seed: int) -> tuple[dict, bytes]:
    digest, tar = compiled_entry_tar(seed=seed)
    return {"name": "D1", "content_hash": digest}, tar


def _own_competition(world: World, actor: str, *phases: dict) -> dict:
    body = {"slug": f"b-{uuid.uuid4().hex[:8]}", "title": "B", "phases": list(phases)}
    answer = world.env.client.post("/api/v1/competitions", headers=world.headers[actor],
                                   json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _seed() -> int:
    return uuid.uuid4().int % 100_000 + 10_000


# --- D1: runs on another competition's private data ----------------------------------------

def test_a_draft_phase_may_not_name_another_organizers_dataset(world: World) -> None:
    theirs = _register(world, "organizer", _seed())
    client, headers = world.env.client, world.headers["other_organizer"]
    comp = _own_competition(world, "other_organizer",
                            {"name": "dev", "status": "draft", "protocol": {"name": "fixed"}})
    created = client.post(f"/api/v1/competitions/{comp['id']}/phases", headers=headers,
                          json={"name": "final", "status": "draft",
                                "data": {"meta_test": [theirs]}})
    assert created.status_code == 422, created.text
    assert created.json()["error"]["code"] == "phase.unknown_dataset"
    patched = client.patch(f"/api/v1/phases/{comp['phases'][0]['id']}", headers=headers,
                           json={"status": "draft", "data": {"meta_test": [theirs]}})
    assert patched.status_code == 422, patched.text
    mine = client.post(f"/api/v1/competitions/{world.ids['competition_id']}/phases",
                       headers=world.headers["organizer"],
                       json={"name": "own-data", "status": "draft",
                             "data": {"meta_test": [theirs]}})
    assert mine.status_code == 201, mine.text  # the rule stops others, not the owner


def test_closing_into_a_final_on_another_organizers_data_is_refused(world: World) -> None:
    """The hash is named while nobody registered it; its owner registers it later: the close
    that would carry into that final (and run there) is refused, and nothing is carried."""
    client, headers = world.env.client, world.headers["other_organizer"]
    ref, tar = _unregistered(_seed())
    comp = _own_competition(world, "other_organizer",
                            {"name": "dev", "status": "open", "protocol": {"name": "fixed"}})
    dev = comp["phases"][0]["id"]
    final = client.post(f"/api/v1/competitions/{comp['id']}/phases", headers=headers,
                        json={"name": "final", "status": "draft", "carry_from_id": dev,
                              "data": {"meta_test": [ref]}})
    assert final.status_code == 201, final.text
    probe = world.env.upload(dev, headers, zip_bytes()).json()
    finish_run(world.env, probe["runs"][0]["id"])
    registered = client.post("/api/v1/datasets", headers=world.headers["organizer"],
                             files={"file": ("d.tar", tar, "application/x-tar")})
    assert registered.status_code == 201, registered.text
    jobs_before = len(world.env.queue.jobs)
    closed = client.post(f"/api/v1/phases/{dev}/close", headers=headers)
    assert closed.status_code == 422, closed.text
    assert closed.json()["error"]["code"] == "phase.unknown_dataset"
    assert len(world.env.queue.jobs) == jobs_before
    assert client.get(f"/api/v1/phases/{dev}", headers=headers).json()["status"] == "open"


def test_rerunning_in_a_phase_on_another_organizers_data_is_refused(world: World) -> None:
    client, headers = world.env.client, world.headers["other_organizer"]
    ref, tar = _unregistered(_seed())
    comp = _own_competition(world, "other_organizer",
                            {"name": "dev", "status": "open", "protocol": {"name": "fixed"}})
    dev = comp["phases"][0]["id"]
    probe = world.env.upload(dev, headers, zip_bytes()).json()
    finish_run(world.env, probe["runs"][0]["id"])
    moved = client.patch(f"/api/v1/phases/{dev}", headers=headers,
                         json={"status": "draft", "data": {"meta_test": [ref]}})
    assert moved.status_code == 200, moved.text
    registered = client.post("/api/v1/datasets", headers=world.headers["organizer"],
                             files={"file": ("d.tar", tar, "application/x-tar")})
    assert registered.status_code == 201, registered.text
    jobs_before = len(world.env.queue.jobs)
    for path in (f"/api/v1/submissions/{probe['id']}/rerun", f"/api/v1/phases/{dev}/rerun"):
        answer = client.post(path, headers=headers)
        assert answer.status_code == 422, (path, answer.text)
    assert len(world.env.queue.jobs) == jobs_before


# --- D2: drafts, seeds, split seeds, hashes ------------------------------------------------

def test_drafts_are_seen_by_their_organizers_only(world: World) -> None:
    draft = world.ids["draft_phase_id"]
    comp_id = world.ids["competition_id"]
    for role, want in (("other_organizer", "denied"), ("organizer", "allowed"),
                       ("admin", "allowed"), ("owner", "denied")):
        for path in (f"/api/v1/phases/{draft}", f"/phases/{draft}",
                     f"/phases/{draft}/leaderboard", f"/api/v1/phases/{draft}/leaderboard"):
            got = outcome(world.env.client.get(path, headers=world.headers[role]))
            assert got == want, (role, path, got)
        listed = world.env.client.get("/api/v1/phases", headers=world.headers[role]).json()
        assert (draft in {p["id"] for p in listed}) == (want == "allowed"), role
        comps = world.env.client.get("/api/v1/competitions", headers=world.headers[role]).json()
        phases = {p["id"] for c in comps if c["id"] == comp_id for p in c["phases"]}
        assert (draft in phases) == (want == "allowed"), role
        page = world.env.client.get(f"/competitions/{comp_id}", headers=world.headers[role])
        assert (f"/phases/{draft}\"" in page.text) == (want == "allowed"), role


def test_seeds_and_hashes_are_for_the_competitions_organizers_only(world: World) -> None:
    ref = _register(world, "organizer", _seed())
    phase = world.ids["phase_id"]
    answer = world.env.client.patch(
        f"/api/v1/phases/{phase}", headers=world.headers["organizer"],
        json={"seed": 31337, "data": {"meta_test": [ref]},
              "protocol": {"name": "within-domain", "split_seed": 77}})
    assert answer.status_code == 200, answer.text
    for role, staff in (("other_organizer", False), ("owner", False), ("organizer", True),
                        ("admin", True)):
        headers = world.headers[role]
        seen = [world.env.client.get(f"/api/v1/phases/{phase}", headers=headers).json()]
        seen += [p for p in world.env.client.get("/api/v1/phases", headers=headers).json()
                 if p["id"] == phase]
        seen += [p for c in world.env.client.get("/api/v1/competitions", headers=headers).json()
                 for p in c["phases"] if p["id"] == phase]
        assert len(seen) == 3, role
        for out in seen:
            assert (out["seed"] == 31337) == staff, (role, out["seed"])
            assert ("split_seed" in out["protocol"]) == staff, (role, out["protocol"])
            hashes = [r["content_hash"] for r in out["data"]["meta_test"]]
            assert (hashes == [ref["content_hash"]]) == staff, (role, hashes)


# --- D3: accounts ----------------------------------------------------------------------------

def test_an_organizer_lists_and_revokes_only_the_accounts_they_manage(world: World) -> None:
    client = world.env.client
    made = client.post("/api/v1/users", headers=world.headers["other_organizer"],
                       json={"username": f"mine-{uuid.uuid4().hex[:6]}", "role": "participant"})
    assert made.status_code == 201, made.text
    mine = made.json()["id"]
    theirs = world.ids["user_id"]  # a participant of the first organizer's competition

    def listed(role: str) -> set[int]:
        answer = client.get("/api/v1/users", headers=world.headers[role])
        assert answer.status_code == 200, answer.text
        return {u["id"] for u in answer.json()}

    assert theirs in listed("organizer") and theirs in listed("admin")
    assert theirs not in listed("other_organizer")
    assert mine in listed("other_organizer") and mine not in listed("organizer")
    refused = client.post(f"/api/v1/users/{theirs}/revoke",
                          headers=world.headers["other_organizer"])
    assert refused.status_code == 404, refused.text
    assert outcome(client.get("/api/v1/me", headers=world.headers["other"])) == "allowed"
    revoked = client.post(f"/api/v1/users/{mine}/revoke", headers=world.headers["other_organizer"])
    assert revoked.status_code == 200, revoked.text


def test_every_get_route_on_a_draft_phase_answers_its_organizers_only(world: World) -> None:
    """The matrix's routes that take a phase id, called on a draft phase of the world's
    competition: only its organizer and admins are let in (the second organizer is not)."""
    from authz_world import app_routes

    failures = []
    world.ids["phase_id"] = world.ids["draft_phase_id"]
    for method, path in app_routes(world.env.client.app):
        if method != "GET" or "{phase_id}" not in path:
            continue
        for role in ("anonymous", "owner", "other", "organizer", "other_organizer", "admin"):
            got = outcome(call(world, method, path, role))
            want = "allowed" if role in ("organizer", "admin") else "denied"
            if got != want:
                failures.append(f"GET {path} as {role}: expected {want}, got {got}")
    assert failures == []


def test_a_bundle_draft_phase_may_not_name_another_organizers_dataset(world: World) -> None:
    """The bundle path too (issue 20, D1: create and update, whatever the phase's status)."""
    theirs = _register(world, "organizer", _seed())
    slug = f"b-{uuid.uuid4().hex[:8]}"
    bundle = (f"slug: {slug}\ntitle: B\nphases:\n  - name: dev\n    status: draft\n"
              f"    data:\n      meta_test: [\"D1@{theirs['content_hash']}\"]\n")
    answer = world.env.client.post("/api/v1/competitions/bundle",
                                   headers=world.headers["other_organizer"],
                                   json={"yaml": bundle})
    assert answer.status_code == 422, answer.text
    assert "registered by another organizer" in answer.text
    assert world.env.client.get(f"/api/v1/competitions/{slug}",
                                headers=world.headers["other_organizer"]).status_code == 404
