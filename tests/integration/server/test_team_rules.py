"""Teams that hold against hostile participants (issue 33 items 5-8, 10, 13), on SQLite and
Postgres through the real routes: look-alike names, quota that no change of team refills,
joins that cannot overfill a team, removed members who lose the team, the last member out
dissolving it, concurrent creates that end in one team and 409s, staff kept out of teams."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from _server_support import zip_bytes
from sqlalchemy import func, select
from test_teams import create, finish, join, team_competition

from server.core.errors import ArenaError
from server.models import Competition, Submission, Team, User
from server.services import teams as service


def submit(env, phase_id, headers, tag: str):
    env.clock.advance(minutes=1)  # each step at its own time, as people act
    return env.submit(phase_id, headers, zip_bytes([("model.py", f"# {tag}\n".encode())]))


def leave(env, comp_id, headers):
    env.clock.advance(minutes=1)
    return env.client.post(f"/api/v1/competitions/{comp_id}/team/leave", headers=headers)


def team_submissions(env, team_id: int) -> int:
    with env.db.session() as s:
        return s.execute(select(func.count(Submission.id)).where(
            Submission.team_id == team_id)).scalar_one()


def test_team_names_that_look_like_a_taken_one_are_refused(env):
    comp_id, _ = team_competition(env, max_size=1)
    users = [env.user(f"u{i}")[1] for i in range(6)]
    assert create(env, comp_id, users[0], "Few-shot Foxes").status_code == 201
    assert create(env, comp_id, users[1], "BRAVO").status_code == 201
    cyrillic = create(env, comp_id, users[2], "Few-shot Fоxes")  # Cyrillic о
    assert cyrillic.status_code == 422, cyrillic.text
    assert cyrillic.json()["error"]["code"] == "name.mixed_script"
    assert "one alphabet" in cyrillic.json()["error"]["message"]
    for headers, name in ((users[3], "Ｆｅｗ-shot Foxes"), (users[4], "ᏴᎡᎪᏙᎾ"),
                          (users[5], "few-shot   FOXES")):
        refused = create(env, comp_id, headers, name)
        assert refused.status_code == 409, (name, refused.text)
        assert refused.json()["error"]["code"] == "team.name_taken"
        assert "exists in this competition" in refused.json()["error"]["message"]
    with env.db.session() as s:
        names = sorted(s.execute(select(Team.name).where(
            Team.competition_id == comp_id)).scalars())
    assert names == ["BRAVO", "Few-shot Foxes"]


def test_leaving_submitting_alone_and_rejoining_never_gives_the_team_more_than_its_quota(env):
    comp_id, phase_id = team_competition(env, max_size=3, quota_per_day=2)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    _, cat = env.user("cat")
    made = create(env, comp_id, ann).json()
    assert join(env, comp_id, bob, made["invite_code"]).status_code == 200
    assert [submit(env, phase_id, ann, t).status_code for t in "ab"] == [201, 201]
    assert leave(env, comp_id, bob).status_code == 204
    alone = submit(env, phase_id, bob, "c")  # the team's two were made while bob was in it
    assert alone.status_code == 429, alone.text
    # cat joins after the team's two, leaves, spends two alone, and cannot bring them back
    assert join(env, comp_id, cat, made["invite_code"]).status_code == 200
    assert leave(env, comp_id, cat).status_code == 204
    assert [submit(env, phase_id, cat, t).status_code for t in "de"] == [201, 201]
    back = join(env, comp_id, cat, made["invite_code"])
    assert back.status_code == 409 and back.json()["error"]["code"] == "team.quota", back.text
    assert "past its quota of 2" in back.json()["error"]["message"]
    assert team_submissions(env, made["id"]) == 2


def test_leaving_to_found_a_fresh_team_gives_no_fresh_quota(env):
    comp_id, phase_id = team_competition(env, quota_total=2)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    join(env, comp_id, bob, create(env, comp_id, ann).json()["invite_code"])
    assert [submit(env, phase_id, ann, t).status_code for t in "ab"] == [201, 201]
    assert leave(env, comp_id, bob).status_code == 204
    assert create(env, comp_id, bob, "Wolves").status_code == 201
    refused = submit(env, phase_id, bob, "c")
    assert refused.status_code == 429 and "2 of 2" in refused.text
    quota = env.client.get(f"/api/v1/phases/{phase_id}/quota", headers=bob).json()
    assert quota["total"] == {"left": 0, "limit": 2}


def test_the_last_member_out_dissolves_the_team_and_leaves_no_board_entry(env):
    comp_id, phase_id = team_competition(env)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    made = create(env, comp_id, ann).json()
    finish(env, submit(env, phase_id, ann, "a").json()["runs"][0]["id"], 0.5)
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [(e["team"], e["username"]) for e in board] == [("Foxes", "ann")]
    assert leave(env, comp_id, ann).status_code == 204
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [(e["team"], e["username"]) for e in board] == [(None, "ann")]
    inherit = join(env, comp_id, bob, made["invite_code"])  # no one inherits the entry
    assert inherit.status_code == 404, inherit.text
    assert env.client.get(f"/api/v1/competitions/{comp_id}/teams", headers=bob).json() == []
    assert create(env, comp_id, ann, "Wolves").status_code == 201  # her entry follows her
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [(e["team"], e["username"]) for e in board] == [("Wolves", "ann")]


def test_a_removed_member_loses_the_team_its_code_and_its_entry(env):
    comp_id, phase_id = team_competition(env)
    _, ann = env.user("ann")
    bob_user, bob = env.user("bob")
    made = create(env, comp_id, ann).json()
    join(env, comp_id, bob, made["invite_code"])
    sub = submit(env, phase_id, bob, "b").json()
    finish(env, sub["runs"][0]["id"], 0.7)
    removed = env.client.delete(f"/api/v1/teams/{made['id']}/members/{bob_user.id}",
                                headers=ann)
    assert removed.status_code == 204
    again = join(env, comp_id, bob, made["invite_code"])
    assert again.status_code == 404, again.text  # the code was rotated
    fresh = env.client.get(f"/api/v1/competitions/{comp_id}/team", headers=ann).json()
    assert fresh["invite_code"] != made["invite_code"]
    chose = env.client.post(f"/api/v1/submissions/{sub['id']}/select", headers=bob)
    assert chose.status_code == 403 and chose.json()["error"]["code"] == "team.not_member"
    assert env.client.delete(f"/api/v1/teams/{made['id']}/members/{bob_user.id}",
                             headers=bob).status_code == 403


def test_concurrent_joins_never_overfill_a_team(env):
    comp_id, _ = team_competition(env, max_size=3)
    _, ann = env.user("ann")
    code = create(env, comp_id, ann).json()["invite_code"]
    joiners = [env.user(f"j{i}")[0] for i in range(4)]
    barrier, outcomes = threading.Barrier(4), []

    def join_now(user: User) -> None:
        barrier.wait()
        with env.db.session(write=True) as s:
            comp = s.get_one(Competition, comp_id)
            try:
                service.join_team(s, comp, s.get_one(User, user.id), code, env.clock.now)
                outcomes.append("joined")
            except ArenaError as exc:
                outcomes.append(exc.code)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(join_now, joiners))
    assert sorted(outcomes) == ["joined", "joined", "team.full", "team.full"]
    mine = env.client.get(f"/api/v1/competitions/{comp_id}/team", headers=ann).json()
    assert mine["size"] == 3


def test_one_users_concurrent_creates_give_one_team_and_409s(env):
    comp_id, _ = team_competition(env)
    _, ann = env.user("ann")
    barrier = threading.Barrier(4)

    def make(i: int) -> int:
        barrier.wait()
        return create(env, comp_id, ann, f"Team {i}").status_code

    with ThreadPoolExecutor(4) as pool:
        codes = sorted(pool.map(make, range(4)))
    assert codes[0] == 201 and all(400 <= c < 500 for c in codes[1:]), codes
    assert len(env.client.get(f"/api/v1/competitions/{comp_id}/teams", headers=ann).json()) == 1


def test_organizers_and_admins_are_in_no_participant_team(env):
    owner, organizer = env.user("olga", role="organizer")
    comp_id, _ = team_competition(env)
    with env.db.session() as s:
        s.get_one(Competition, comp_id).owner_id = owner.id
    _, other_org = env.user("oscar", role="organizer")
    _, admin = env.user("root", role="admin")
    _, ann = env.user("ann")
    code = create(env, comp_id, ann).json()["invite_code"]
    for headers in (organizer, other_org, admin):
        made = create(env, comp_id, headers, "Staff")
        assert made.status_code == 403 and made.json()["error"]["code"] == "team.staff"
        joined = join(env, comp_id, headers, code)
        assert joined.status_code == 403 and joined.json()["error"]["code"] == "team.staff"
        assert "participant account" in joined.json()["error"]["message"]


def test_a_dissolved_teams_submissions_go_back_to_their_makers_and_stay_charged(env):
    comp_id, phase_id = team_competition(env, quota_total=2)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    join(env, comp_id, bob, create(env, comp_id, ann).json()["invite_code"])
    finish(env, submit(env, phase_id, ann, "a").json()["runs"][0]["id"], 0.5)
    assert leave(env, comp_id, ann).status_code == 204  # her submission stays the team's
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [e["team"] for e in board] == ["Foxes"]
    assert create(env, comp_id, ann, "Owls").status_code == 201
    assert leave(env, comp_id, bob).status_code == 204  # the last one out: Foxes dissolves
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [(e["team"], e["username"]) for e in board] == [("Owls", "ann")]
    quota = env.client.get(f"/api/v1/phases/{phase_id}/quota", headers=bob).json()
    assert quota["total"] == {"left": 1, "limit": 2}  # ann's, made while bob was her team-mate
