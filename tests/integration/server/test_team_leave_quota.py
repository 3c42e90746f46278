"""Leaving a team does not refill the team's quota (issue 35.6): `test_teams.py`'s quota test
said so in its name, but nobody left. Here a member does leave, through the real route, on
SQLite and Postgres, and the team keeps what the leaver spent in it."""

from __future__ import annotations

from _server_support import zip_bytes

from server.models import Competition, Phase


def team_competition(env, quota_total: int) -> tuple[int, int]:
    phase_row = env.phase(quota_total=quota_total)
    with env.db.session() as s:
        comp = s.get(Competition, s.get(Phase, phase_row.id).competition_id)
        comp.teams_allowed, comp.team_max_size = True, 3
        return comp.id, phase_row.id


def quota_left(env, phase_id: int, headers: dict) -> int:
    quota = env.client.get(f"/api/v1/phases/{phase_id}/quota", headers=headers).json()
    return quota["total"]["left"]


def test_a_member_who_leaves_does_not_refill_the_teams_quota(env):
    comp_id, phase_id = team_competition(env, quota_total=2)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    made = env.client.post(f"/api/v1/competitions/{comp_id}/teams", headers=ann,
                           json={"name": "Foxes"})
    joined = env.client.post(f"/api/v1/competitions/{comp_id}/teams/join", headers=bob,
                             json={"code": made.json()["invite_code"]})
    assert joined.status_code == 200, joined.text
    assert env.submit(phase_id, bob).status_code == 201
    assert env.submit(phase_id, ann, zip_bytes([("model.py", b"# a\n")])).status_code == 201
    assert quota_left(env, phase_id, ann) == quota_left(env, phase_id, bob) == 0

    left = env.client.post(f"/api/v1/competitions/{comp_id}/team/leave", headers=bob)
    assert left.status_code == 204, left.text
    assert env.client.get(f"/api/v1/competitions/{comp_id}/team", headers=bob).status_code == 404

    # The team keeps what bob spent in it, for every member who stays.
    refused = env.submit(phase_id, ann, zip_bytes([("model.py", b"# a2\n")]))
    assert refused.status_code == 429 and "2 of 2" in refused.text, refused.text
    assert quota_left(env, phase_id, ann) == 0
