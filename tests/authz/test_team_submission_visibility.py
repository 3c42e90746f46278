"""Who reads and selects a team's submissions (issue 32.2, issue 33 item 7), on every route that
serves one, through the real app: a current team-mate reads them (API, logs, results, the page)
and selects the team's entry; a member of another team, and a member removed from the team,
read none of them (404, like an id that does not exist) and select nothing for it — membership
is checked now, not the submission's team stamp. Fails at a55d28d (a team-mate got 404, and a
removed member's select of their own team submission moved the team's entry)."""

from __future__ import annotations

import uuid

import pytest
from authz_world import finish_run
from inprocess_support import inprocess_app, zip_bytes

ROUTES = ("/api/v1/submissions/{}", "/api/v1/submissions/{}/logs",
          "/api/v1/submissions/{}/results")


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("team-visibility")) as env:
        yield env


def _team_world(env):
    tag = uuid.uuid4().hex[:6]
    organizer = env.token_for(f"org-{tag}", "organizer")
    comp = env.competition(organizer)
    from server.models import Competition

    with env.db.session() as session:
        session.get(Competition, comp["id"]).teams_allowed = True
    people = {name: env.token_for(f"{name}-{tag}") for name in ("cap", "mate", "gone", "rival")}
    url = f"/api/v1/competitions/{comp['id']}/teams"
    team = env.client.post(url, headers=people["cap"], json={"name": f"Owls {tag}"}).json()
    ids = {}
    for name in ("mate", "gone"):
        joined = env.client.post(f"{url}/join", headers=people[name],
                                 json={"code": team["invite_code"]})
        assert joined.status_code == 200, joined.text
        ids[name] = joined.json()["members"][-1]["user_id"]
    assert env.client.post(url, headers=people["rival"],
                           json={"name": f"Bats {tag}"}).status_code == 201
    phase_id = comp["phases"][0]["id"]
    subs = {}
    for name in ("cap", "gone"):
        made = env.upload(phase_id, people[name], zip_bytes([("model.py", name.encode())]))
        assert made.status_code == 201, made.text
        finish_run(env, made.json()["runs"][0]["id"])
        subs[name] = made.json()["id"]
    return people, team, ids, subs, phase_id


def _status(env, headers, submission_id: int) -> set[int]:
    return {env.client.get(route.format(submission_id), headers=headers).status_code
            for route in ROUTES}


def test_team_mates_read_and_select_and_outsiders_and_removed_members_do_not(app_env) -> None:
    env = app_env
    people, team, ids, subs, phase_id = _team_world(env)
    assert _status(env, people["mate"], subs["cap"]) == {200}
    assert _status(env, people["gone"], subs["cap"]) == {200}
    assert _status(env, people["rival"], subs["cap"]) == {404}
    chosen = env.client.post(f"/api/v1/submissions/{subs['gone']}/select",
                             headers=people["mate"])
    assert chosen.status_code == 200, chosen.text
    assert env.client.post(f"/api/v1/submissions/{subs['cap']}/select",
                           headers=people["rival"]).status_code == 404

    removed = env.client.delete(f"/api/v1/teams/{team['id']}/members/{ids['gone']}",
                                headers=people["cap"])
    assert removed.status_code == 204, removed.text
    assert _status(env, people["gone"], subs["cap"]) == {404}
    assert _status(env, people["gone"], subs["gone"]) == {200}  # their own upload stays theirs
    for sid in (subs["cap"], subs["gone"]):
        answer = env.client.post(f"/api/v1/submissions/{sid}/select", headers=people["gone"],
                                 json={"selected": False})
        assert answer.status_code in (403, 404), answer.text
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    entry = next(e for e in board["entries"] if e["team"] == team["name"])
    assert entry["submission_id"] == subs["gone"] and entry["is_selected"]  # unmoved
