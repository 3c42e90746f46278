"""Teams (issue 23 item 3) through the real routes on SQLite and Postgres: create, join by
code, leave, captain removes; one team per person; max size and lock date; the team's quota
counted atomically across members; one board entry per team under its name; audited."""

from __future__ import annotations

import threading
from datetime import timedelta

from _server_support import zip_bytes
from sqlalchemy import select

from server.core.errors import QuotaExceededError
from server.models import AuditLog, Competition, Phase
from server.services.storage import Storage
from server.services.upload import StagedUpload, accept_submission
from submission_api.submission_zip import ZipLimits


def team_competition(env, max_size: int = 3, **phase) -> tuple[int, int]:
    phase_row = env.phase(**phase)
    with env.db.session() as s:
        comp = s.get(Competition, s.get(Phase, phase_row.id).competition_id)
        comp.teams_allowed, comp.team_max_size = True, max_size
        return comp.id, phase_row.id


def create(env, comp_id, headers, name="Foxes"):
    return env.client.post(f"/api/v1/competitions/{comp_id}/teams", headers=headers,
                           json={"name": name})


def join(env, comp_id, headers, code):
    return env.client.post(f"/api/v1/competitions/{comp_id}/teams/join", headers=headers,
                           json={"code": code})


def test_a_team_is_made_joined_by_code_and_its_captain_removes_members(env):
    comp_id, _ = team_competition(env)
    _, ann = env.user("ann")
    bob_user, bob = env.user("bob")
    made = create(env, comp_id, ann)
    assert made.status_code == 201, made.text
    code = made.json()["invite_code"]
    assert join(env, comp_id, bob, "wrong").status_code == 404
    joined = join(env, comp_id, bob, code)
    assert [m["username"] for m in joined.json()["members"]] == ["ann", "bob"]
    listed = env.client.get(f"/api/v1/competitions/{comp_id}/teams", headers=bob).json()
    assert listed == [{"id": made.json()["id"], "name": "Foxes", "size": 2}]  # no code
    again = create(env, comp_id, bob, "Wolves")
    assert again.status_code == 403 and again.json()["error"]["code"] == "team.already"
    team_id = made.json()["id"]
    _, cat = env.user("cat")
    assert env.client.delete(f"/api/v1/teams/{team_id}/members/{bob_user.id}",
                             headers=bob).status_code == 403  # bob is not the captain
    join(env, comp_id, cat, code)
    assert env.client.delete(f"/api/v1/teams/{team_id}/members/{bob_user.id}",
                             headers=cat).status_code == 403
    assert env.client.delete(f"/api/v1/teams/{team_id}/members/{bob_user.id}",
                             headers=ann).status_code == 204
    assert env.client.get(f"/api/v1/competitions/{comp_id}/team",
                          headers=bob).status_code == 404
    with env.db.session() as s:
        actions = s.execute(select(AuditLog.action).where(
            AuditLog.target == f"team:{team_id}").order_by(AuditLog.id)).scalars().all()
    assert actions == ["team.create", "team.join", "team.join", "team.remove"]


def test_max_size_lock_date_and_no_teams_are_enforced(env):
    comp_id, _ = team_competition(env, max_size=1)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    code = create(env, comp_id, ann).json()["invite_code"]
    assert join(env, comp_id, bob, code).json()["error"]["code"] == "team.full"
    with env.db.session() as s:
        s.get(Competition, comp_id).teams_lock_at = env.clock.now - timedelta(hours=1)
    left = env.client.post(f"/api/v1/competitions/{comp_id}/team/leave", headers=ann)
    assert left.status_code == 409 and left.json()["error"]["code"] == "team.locked"
    with env.db.session() as s:
        s.get(Competition, comp_id).teams_allowed = False
    assert create(env, comp_id, bob).json()["error"]["code"] == "team.not_allowed"


def test_the_quota_is_the_teams_and_leaving_does_not_refill_it(env):
    comp_id, phase_id = team_competition(env, quota_total=2)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    assert env.submit(phase_id, bob).status_code == 201  # before joining: joins with bob
    code = create(env, comp_id, ann).json()["invite_code"]
    join(env, comp_id, bob, code)
    assert env.submit(phase_id, ann, zip_bytes([("model.py", b"# a\n")])).status_code == 201
    refused = env.submit(phase_id, bob, zip_bytes([("model.py", b"# b\n")]))
    assert refused.status_code == 429 and "2 of 2" in refused.text
    quota = env.client.get(f"/api/v1/phases/{phase_id}/quota", headers=ann).json()
    assert quota["total"] == {"left": 0, "limit": 2}  # the team's, seen by every member
    # bob leaves: what the team used stays used (ann may not submit again), and bob keeps
    # what he made himself (1 of 2), not a fresh quota
    left = env.client.post(f"/api/v1/competitions/{comp_id}/team/leave", headers=bob)
    assert left.status_code == 204, left.text
    quota = env.client.get(f"/api/v1/phases/{phase_id}/quota", headers=ann).json()
    assert quota["total"] == {"left": 0, "limit": 2}
    refused = env.submit(phase_id, ann, zip_bytes([("model.py", b"# c\n")]))
    assert refused.status_code == 429, refused.text
    quota = env.client.get(f"/api/v1/phases/{phase_id}/quota", headers=bob).json()
    assert quota["total"] == {"left": 1, "limit": 2}


def test_two_members_cannot_both_take_the_teams_last_slot(env):
    comp_id, phase_id = team_competition(env, max_size=4, quota_total=1)
    users = [env.user(f"m{i}") for i in range(4)]
    code = create(env, comp_id, users[0][1]).json()["invite_code"]
    for _, headers in users[1:]:
        assert join(env, comp_id, headers, code).status_code == 200
    storage, barrier, outcomes = Storage(env.settings.storage), threading.Barrier(4), []

    def upload(i: int) -> None:
        path = storage.tmp_path()
        data = zip_bytes([("model.py", f"# {i}\n".encode())])
        path.write_bytes(data)
        staged = StagedUpload(path=path, sha256=f"{i:064x}", size=len(data))
        barrier.wait()
        try:
            accept_submission(env.db, storage, env.queue, user_id=users[i][0].id,
                              phase_id=phase_id, staged=staged, now=env.clock.now,
                              limits=ZipLimits(), default_queue="arena")
            outcomes.append("accepted")
        except QuotaExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["accepted", "refused", "refused", "refused"]


def finish(env, run_id: int, score: float) -> None:
    from submission_api.scoring import TaskRecord, summarize_run

    token = next(t for r, t, _ in env.queue.jobs if r == run_id)
    bearer = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", headers=bearer,
                              json={"worker": "w", "host_lock": True}).json()  # finals too
    records = [TaskRecord(id=i, dataset="d", group="test", n_ways=2, n_shots=1, score=score,
                          accuracy=score, worst_class_accuracy=score) for i in range(3)]
    done = env.client.post(f"/internal/runs/{run_id}/finish", headers=bearer, json={
        "fencing_token": claimed["fencing_token"], "state": "finished",
        "summary": summarize_run(records).to_dict(), "tasks": [r.to_dict() for r in records]})
    assert done.status_code == 200, done.text


def test_the_board_shows_one_entry_per_team_under_its_name(env):
    comp_id, phase_id = team_competition(env)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    _, cat = env.user("cat")
    code = create(env, comp_id, ann).json()["invite_code"]
    join(env, comp_id, bob, code)
    for headers, score, body in ((ann, 0.5, b"# a\n"), (bob, 0.7, b"# b\n"),
                                 (cat, 0.6, b"# c\n")):
        made = env.submit(phase_id, headers, zip_bytes([("model.py", body)])).json()
        finish(env, made["runs"][0]["id"], score)
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    rows = [(e["team"], e["username"]) for e in board["entries"]]
    assert rows == [("Foxes", "bob"), (None, "cat")]
    page = env.client.get(f"/phases/{phase_id}/leaderboard").text
    assert "Foxes" in page and 'class="tag team"' in page


def test_a_submission_carries_its_method_to_the_board_and_a_bad_link_loses_nothing(env):
    comp_id, phase_id = team_competition(env)
    _, ann = env.user("ann")
    bad = env.client.post(f"/api/v1/phases/{phase_id}/submissions", headers=ann,
                          files={"file": ("s.zip", zip_bytes(), "application/zip")},
                          data={"method": "ProtoNet", "code_url": "javascript:alert(1)"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "method.bad_url"
    assert env.queue.jobs == []
    made = env.client.post(f"/api/v1/phases/{phase_id}/submissions", headers=ann,
                           files={"file": ("s.zip", zip_bytes(), "application/zip")},
                           data={"method": "ProtoNet + FT", "description": "fine-tunes",
                                 "code_url": "https://example.org/repo"})
    assert made.status_code == 201, made.text
    got = env.client.get(f"/api/v1/submissions/{made.json()['id']}", headers=ann).json()
    assert (got["method_name"], got["code_url"]) == ("ProtoNet + FT", "https://example.org/repo")
    finish(env, made.json()["runs"][0]["id"], 0.5)
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    assert board["entries"][0]["method"] == "ProtoNet + FT"
