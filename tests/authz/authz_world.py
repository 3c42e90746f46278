"""The seeded world of the authorization matrix: one actor per role, a competition with an open
phase, submissions of two participants, another organizer's competition, and how to call any
route with its path parameters filled from that world."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from fastapi import routing
from inprocess_support import InProcess, zip_bytes

from submission_api.scoring import TaskRecord, summarize_run

ROLES = ("anonymous", "owner", "other", "organizer", "other_organizer", "admin")


@dataclass
class World:
    env: InProcess
    headers: dict[str, dict[str, str]]
    ids: dict[str, object]


def build_world(env: InProcess) -> World:
    tag = uuid.uuid4().hex[:8]
    organizer = env.token_for(f"org-{tag}", "organizer")
    other_organizer = env.token_for(f"org2-{tag}", "organizer")
    owner, other = env.token_for(f"owner-{tag}"), env.token_for(f"other-{tag}")
    competition = env.competition(organizer)
    env.competition(other_organizer)
    phase_id = competition["phases"][0]["id"]
    mine = env.upload(phase_id, owner, zip_bytes()).json()
    env.upload(phase_id, other, zip_bytes([("model.py", b"# other\n")]))
    finish_run(env, mine["runs"][0]["id"])
    static = sorted(p.name for p in (_static_dir()).iterdir() if p.is_file())[0]
    other_id = env.client.get("/api/v1/me", headers=other).json()["id"]
    team = _teams(env, competition["id"], owner, other, env.token_for(f"mate-{tag}"))
    laptop = env.client.post("/api/v1/me/tokens", headers=owner, json={"name": "laptop"})
    assert laptop.status_code == 201, laptop.text
    pool = env.client.post(f"/api/v1/competitions/{competition['id']}/pools", headers=organizer,
                           json={"name": "gpu-hosts"})
    assert pool.status_code == 201, pool.text
    credential = env.client.get(f"/api/v1/pools/{pool.json()['pool']['id']}",
                                headers=organizer).json()["credentials"][0]
    return World(env=env, headers={
        "anonymous": {}, "owner": owner, "other": other, "organizer": organizer,
        "other_organizer": other_organizer, "admin": env.admin},
        ids={"submission_id": mine["id"], "phase_id": phase_id,
             "competition_id": competition["id"], "ref": competition["slug"],
             "run_id": mine["runs"][0]["id"], "run_index": 0, "content_hash": "ab" * 32,
             "name": static, "user_id": other_id, "other_submission_id": mine["id"],
             "token_id": laptop.json()["id"], "token": "not-a-reset-link",
             "pool_id": pool.json()["pool"]["id"], "credential_id": credential["id"], **team})


def _teams(env: InProcess, competition_id: int, owner, other, mate) -> dict[str, object]:
    """Teams allowed in the world's competition: the owner captains team A (with a mate),
    "other" captains team B; its phase has a one-question fact sheet."""
    from server.models import Competition

    with env.db.session() as session:
        comp = session.get(Competition, competition_id)
        comp.teams_allowed, comp.team_max_size = True, 10
        comp.phases[0].factsheet = [{"key": "approach", "label": "Your approach",
                                     "kind": "text", "required": False, "choices": []}]
    url = f"/api/v1/competitions/{competition_id}/teams"
    made = env.client.post(url, headers=owner, json={"name": "Team A"})
    assert made.status_code == 201, made.text
    team_a = made.json()
    joined = env.client.post(f"{url}/join", headers=mate, json={"code": team_a["invite_code"]})
    assert joined.status_code == 200, joined.text
    assert env.client.post(url, headers=other, json={"name": "Team B"}).status_code == 201
    return {"team_id": team_a["id"], "code": team_a["invite_code"],
            "member_id": joined.json()["members"][1]["user_id"]}


def finish_run(env: InProcess, run_id: int) -> None:
    """Play the worker through the internal API, so results, logs and the report exist."""
    token = next(t for r, t, _ in env.queue.jobs if r == run_id)
    bearer = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", headers=bearer,
                              json={"worker": "authz", "host_lock": True})  # secret runs too
    assert claimed.status_code == 200, claimed.text
    records = [TaskRecord(id=i, dataset="d", group="test", n_ways=2, n_shots=1 + i % 2,
                          score=0.25 * i, accuracy=0.5, worst_class_accuracy=0.4)
               for i in range(4)]
    summary = summarize_run(records).to_dict()
    done = env.client.post(f"/internal/runs/{run_id}/finish", headers=bearer, json={
        "fencing_token": claimed.json()["fencing_token"], "state": "finished",
        "summary": summary, "tasks": [r.to_dict() for r in records], "log": "log line"})
    assert done.status_code == 200, done.text


def _static_dir():
    from pathlib import Path

    import server

    return Path(server.__file__).resolve().parent / "static"


def app_routes(app) -> list[tuple[str, str]]:
    """Every (METHOD, path) the app serves, HEAD left out (it mirrors GET)."""
    found = set()
    for context in routing.iter_route_contexts(app.routes):
        for method in context.methods or ():
            if method != "HEAD":
                found.add((method, context.path))
    return sorted(found)


def call(world: World, method: str, path: str, role: str):
    url = re.sub(r"{(\w+)(:\w+)?}", lambda m: str(world.ids[m.group(1)]), path)
    headers = dict(world.headers[role])
    kwargs: dict = {"follow_redirects": False}
    if method in ("POST", "PUT", "PATCH"):
        if path.endswith("/submissions") or path.endswith("/submit"):
            kwargs["files"] = {"file": ("s.zip", zip_bytes(), "application/zip")}
        else:
            body = BODIES.get((method, path), {})
            kwargs["json"] = body(world) if callable(body) else body
    return world.env.client.request(method, url, headers=headers, **kwargs)


# Valid bodies where the handler checks the body before ownership (so that an empty body's 422
# cannot hide whether the caller would have been let in).
BODIES = {("POST", "/api/v1/competitions/{competition_id}/phases"): {"name": "extra"},
          ("PUT", "/api/v1/competitions/{ref}/bundle"): {"yaml": "title: T\n"},
          ("POST", "/api/v1/competitions/{ref}/bundle/diff"): {"yaml": "title: T\n"},
          ("PUT", "/api/v1/competitions/{competition_id}/participation/mode"): {"mode": "open"},
          ("POST", "/api/v1/me/tokens"): {"name": "ci"},
          ("POST", "/api/v1/competitions/{competition_id}/teams"): {"name": "Team C"},
          ("PUT", "/api/v1/phases/{phase_id}/factsheet"): {"answers": {"approach": "x"}},
          ("POST", "/api/v1/competitions/{competition_id}/pools"): {"name": "more-gpus"},
          ("PUT", "/api/v1/phases/{phase_id}/pool"): lambda world: {"pool_id":
                                                                     world.ids["pool_id"]},
          ("POST", "/internal/pool/jobs"): {"worker": "authz"},
          ("POST", "/api/v1/competitions/{competition_id}/teams/join"):
              lambda world: {"code": world.ids["code"]}}


def snapshot(env: InProcess) -> dict[str, list]:
    """Every row of every table, and the jobs handed to the queue. Read through the driver's
    own cursor (raw values, one transaction): the result layer's type processing made this the
    forms test's largest cost, and equality of raw rows is the same check."""
    from server.models import Base

    rows: dict[str, list] = {}
    connection = env.db.engine.raw_connection()
    try:
        cursor = connection.cursor()
        for table in Base.metadata.sorted_tables:
            order = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
            cursor.execute(f'SELECT * FROM "{table.name}" ORDER BY {order}')
            rows[table.name] = [tuple(r) for r in cursor.fetchall()]
        connection.rollback()
    finally:
        connection.close()
    return {**rows, "queue jobs": list(env.queue.jobs)}


def changed_tables(before: dict, after: dict) -> list[str]:
    return sorted(name for name in before if before[name] != after[name])


def outcome(response) -> str:
    """'denied' (401, 403, 404, or a redirect to the login page), 'error' (5xx), else 'allowed'."""
    if response.status_code >= 500:
        return "error"
    location = response.headers.get("location", "")
    if response.status_code in (401, 403, 404) or (300 <= response.status_code < 400
                                                     and "/login" in location):
        return "denied"
    return "allowed"
