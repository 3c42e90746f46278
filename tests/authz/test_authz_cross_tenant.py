"""The cross-competition half of the authorization matrix: routes every organizer may call, but
only about their own competitions. Each case names an object of one organizer's competition (a
phase to carry from, a dataset, a run in the queue, a worker's run) and is tried by its owner
(must work, or the case proves nothing), by another organizer (must be refused or see nothing),
and by an admin. Issue 13 item 7: before the fix, every "other_organizer" cell was allowed —
one organizer could carry another competition's submissions into their final and download them.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from authz_world import World, build_world
from inprocess_support import inprocess_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compiled_entries import compiled_entry_tar  # noqa: E402

ACTORS = ("organizer", "other_organizer", "admin")


def _own_competition(world: World, actor: str) -> dict:
    """Where `actor` references things from: for the world's organizer, its competition with
    a new draft phase; for anyone else, a fresh competition of their own (one draft phase)."""
    if actor == "organizer":
        comp_id = world.ids["competition_id"]
        answer = world.env.client.post(
            f"/api/v1/competitions/{comp_id}/phases", headers=world.headers[actor],
            json={"name": f"p-{uuid.uuid4().hex[:6]}", "protocol": {"name": "fixed"}})
        assert answer.status_code == 201, answer.text
        return {"id": comp_id, "phases": [answer.json()]}
    body = {"slug": f"x-{uuid.uuid4().hex[:8]}", "title": "X",
            "phases": [{"name": "dev", "status": "draft", "protocol": {"name": "fixed"}}]}
    answer = world.env.client.post("/api/v1/competitions", headers=world.headers[actor],
                                   json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def _dataset(world: World) -> dict:
    """A dataset the world's organizer registered (a verified upload)."""
    if "dataset" not in world.ids:
        digest, tar = compiled_entry_tar(seed=hash(world.ids["ref"]) % 1000)
        answer = world.env.client.post("/api/v1/datasets", headers=world.headers["organizer"],
                                       files={"file": ("d.tar", tar, "application/x-tar")})
        assert answer.status_code == 201, answer.text
        world.ids["dataset"] = {"name": "D1", "content_hash": digest}
    return world.ids["dataset"]  # type: ignore[return-value]


def carry_on_create(world: World, actor: str) -> bool:
    comp = _own_competition(world, actor)
    answer = world.env.client.post(
        f"/api/v1/competitions/{comp['id']}/phases", headers=world.headers[actor],
        json={"name": "final", "carry_from_id": world.ids["phase_id"]})
    return answer.status_code == 201


def carry_on_update(world: World, actor: str) -> bool:
    phase_id = _own_competition(world, actor)["phases"][0]["id"]
    answer = world.env.client.patch(f"/api/v1/phases/{phase_id}", headers=world.headers[actor],
                                    json={"carry_from_id": world.ids["phase_id"]})
    return answer.status_code == 200


def dataset_on_create(world: World, actor: str) -> bool:
    comp, ref = _own_competition(world, actor), _dataset(world)
    answer = world.env.client.post(
        f"/api/v1/competitions/{comp['id']}/phases", headers=world.headers[actor],
        json={"name": "open", "status": "open", "data": {"meta_test": [ref]}})
    return answer.status_code == 201


def dataset_on_open(world: World, actor: str) -> bool:
    phase_id, ref = _own_competition(world, actor)["phases"][0]["id"], _dataset(world)
    answer = world.env.client.patch(f"/api/v1/phases/{phase_id}", headers=world.headers[actor],
                                    json={"status": "open", "data": {"meta_test": [ref]}})
    return answer.status_code == 200


def dataset_listed(world: World, actor: str) -> bool:
    digest = _dataset(world)["content_hash"]
    listed = world.env.client.get("/api/v1/datasets", headers=world.headers[actor]).json()
    return any(d["content_hash"] == digest for d in listed)


def queue_shows_run(world: World, actor: str) -> bool:
    entries = world.env.client.get("/api/v1/queue", headers=world.headers[actor]).json()
    return any(e["phase_id"] == world.ids["phase_id"] for e in entries)


def worker_shows_run(world: World, actor: str) -> bool:
    if "held_run" not in world.ids:  # a worker claims the other participant's queued run
        run_id, token, _ = next(j for j in reversed(world.env.queue.jobs)
                                if j[0] != world.ids["run_id"])
        claimed = world.env.client.post(f"/internal/runs/{run_id}/claim",
                                        headers={"Authorization": f"Bearer {token}"},
                                        json={"worker": f"w-{world.ids['ref']}"})
        assert claimed.status_code == 200, claimed.text
        world.ids["held_run"] = run_id
    rows = world.env.client.get("/api/v1/admin/workers", headers=world.headers[actor]).json()
    return any(w["current_run_id"] == world.ids["held_run"] for w in rows)


# Case -> expected outcome per actor in ACTORS order: A allowed (sees it), D refused (sees
# nothing). An admin owns no competition, so it cannot carry another's phase into its own.
CASES: dict[str, tuple[Callable[[World, str], bool], str]] = {
    "POST /competitions/{id}/phases carry_from_id=<another competition's phase>":
        (carry_on_create, "ADD"),
    "PATCH /phases/{id} carry_from_id=<another competition's phase>": (carry_on_update, "ADD"),
    "POST /competitions/{id}/phases data=<another organizer's dataset>":
        (dataset_on_create, "ADA"),
    "PATCH /phases/{id} status=open data=<another organizer's dataset>":
        (dataset_on_open, "ADA"),
    "GET /datasets lists <another organizer's dataset>": (dataset_listed, "ADA"),
    "GET /queue lists <another competition's runs>": (queue_shows_run, "ADA"),
    "GET /admin/workers shows <another competition's run>": (worker_shows_run, "ADA"),
}


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("authz-tenant")) as env:
        yield env


@pytest.mark.parametrize("case", list(CASES))
def test_an_organizer_reaches_only_their_own_competitions(app_env, case: str) -> None:
    attempt, rule = CASES[case]
    world = build_world(app_env)
    got = "".join("A" if attempt(world, actor) else "D" for actor in ACTORS)
    assert got == rule, f"{case}: expected {rule} for {ACTORS}, got {got}"


def test_an_organizer_who_uploads_the_same_content_may_use_it(app_env) -> None:
    world = build_world(app_env)
    ref = _dataset(world)
    assert not dataset_on_create(world, "other_organizer")
    _digest, tar = compiled_entry_tar(seed=hash(world.ids["ref"]) % 1000)
    again = world.env.client.post("/api/v1/datasets", headers=world.headers["other_organizer"],
                                  files={"file": ("d.tar", tar, "application/x-tar")})
    assert again.status_code == 201 and again.json()["content_hash"] == ref["content_hash"]
    assert dataset_on_create(world, "other_organizer")
