"""The reconciler, authorization (404 for others' things, 403 for staff routes), leaderboard."""

from __future__ import annotations

import pytest

from server.models import Competition, Run, Submission
from server.services.reconcile import ReconcilePolicy, reconcile
from server.services.runs import LeasePolicy

POLICY = ReconcilePolicy(requeue_after_s=600, lease=LeasePolicy(max_platform_failures=2))


def upload(env, phase, headers) -> tuple[int, int, str]:
    body = env.submit(phase.id, headers).json()
    run_id, token, _ = env.queue.jobs[-1]
    return body["id"], run_id, token


def claim(env, run_id, token) -> int:
    return env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                           headers={"Authorization": f"Bearer {token}"}).json()["fencing_token"]


def run_reconcile(env):
    with env.db.session(write=True) as s:
        return reconcile(s, env.clock.now, env.queue, POLICY)


def test_reconciler_reenqueues_runs_the_broker_lost(env):
    phase = env.phase()
    _, headers = env.user("ann")
    _, run_id, token = upload(env, phase, headers)
    assert run_reconcile(env).requeued == []  # young enough: the broker may still hold it
    env.clock.advance(seconds=601)
    assert run_reconcile(env).requeued == [run_id]
    fresh = env.queue.jobs[-1][1]
    assert fresh != token
    assert claim(env, run_id, fresh) == 1


def test_reconciler_requeues_a_lapsed_lease_then_fails_it_uncharged(env):
    phase = env.phase(quota_total=1)
    _, headers = env.user("ann")
    sub_id, run_id, token = upload(env, phase, headers)
    claim(env, run_id, token)
    env.clock.advance(seconds=61)
    assert run_reconcile(env).expired == [run_id]
    token = env.queue.jobs[-1][1]
    claim(env, run_id, token)
    env.clock.advance(seconds=61)
    assert run_reconcile(env).failed == [run_id]
    with env.db.session() as s:
        run = s.get(Run, run_id)
        assert (run.state, run.reason, run.platform_failures) == ("failed", "platform_error", 2)
        assert s.get(Submission, sub_id).state == "failed"
    assert env.submit(phase.id, headers).status_code == 201  # not charged


def test_reconciler_leaves_live_leases_alone(env):
    phase = env.phase()
    _, headers = env.user("ann")
    _, run_id, token = upload(env, phase, headers)
    claim(env, run_id, token)
    env.clock.advance(seconds=30)
    report = run_reconcile(env)
    assert (report.requeued, report.expired, report.failed) == ([], [], [])


@pytest.mark.parametrize("suffix", ["", "/logs", "/results"])
def test_participant_cannot_see_another_participants_submission(env, suffix):
    phase = env.phase()
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    sub_id, _, _ = upload(env, phase, ann)
    answer = env.client.get(f"/api/v1/submissions/{sub_id}{suffix}", headers=bob)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    assert env.client.get(f"/api/v1/submissions/{sub_id}{suffix}", headers=ann).status_code == 200


def test_my_submissions_lists_only_mine(env):
    phase = env.phase()
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    mine, _, _ = upload(env, phase, ann)
    upload(env, phase, bob)
    assert [s["id"] for s in env.client.get("/api/v1/me/submissions", headers=ann).json()] == [mine]


def test_organizer_reads_logs_that_the_phase_hides_from_the_owner(env):
    phase = env.phase(hide_logs=True)
    _, ann = env.user("ann")
    olga, org = env.user("olga", role="organizer")
    _, other_org = env.user("oscar", role="organizer")
    with env.db.session() as session:  # olga organizes this competition; oscar another one
        session.get(Competition, phase.competition_id).owner_id = olga.id
    sub_id, _, _ = upload(env, phase, ann)
    hidden = env.client.get(f"/api/v1/submissions/{sub_id}/logs", headers=ann)
    assert hidden.status_code == 403 and hidden.json()["error"]["code"] == "logs.hidden"
    assert env.client.get(f"/api/v1/submissions/{sub_id}/logs", headers=org).status_code == 200
    assert env.client.get(f"/api/v1/submissions/{sub_id}/logs",
                          headers=other_org).status_code == 404


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/api/v1/competitions", {"slug": "x", "title": "X"}),
    ("patch", "/api/v1/phases/1", {"status": "closed"}),
    ("get", "/api/v1/datasets", None),
    ("post", "/api/v1/users", {"username": "eve2", "role": "participant"}),
    ("post", "/api/v1/datasets/from-path", {"path": "/etc"}),
])
def test_participant_cannot_reach_organizer_endpoints(env, method, path, body):
    env.phase()
    _, ann = env.user("ann")
    answer = env.client.request(method.upper(), path, json=body, headers=ann)
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "auth.forbidden"


def test_anonymous_requests_get_401_with_a_hint(env):
    answer = env.client.get("/api/v1/me")
    assert answer.status_code == 401
    assert "Bearer" in answer.json()["error"]["message"]


def finish(env, run_id, token, score):
    fencing = claim(env, run_id, token)
    env.client.post(f"/internal/runs/{run_id}/finish", headers={
        "Authorization": f"Bearer {token}"}, json={
        "fencing_token": fencing, "state": "finished", "summary": {"score": score}})


@pytest.mark.parametrize(("rule", "expected"), [
    ("best", [("bob", 0.7), ("ann", 0.7), ("cid", 0.5)]),
    ("latest", [("bob", 0.7), ("cid", 0.5), ("ann", 0.2)]),
])
def test_leaderboard_rule_order_and_ties_to_the_earlier_submission(env, rule, expected):
    phase = env.phase(leaderboard_rule=rule)
    users = {name: env.user(name)[1] for name in ("ann", "bob", "cid")}
    for name, score in [("bob", 0.7), ("ann", 0.7), ("cid", 0.5), ("ann", 0.2)]:
        env.clock.advance(minutes=1)
        _, run_id, token = upload(env, phase, users[name])
        finish(env, run_id, token, score)
    board = env.client.get(f"/api/v1/phases/{phase.id}/leaderboard").json()
    assert [(e["username"], e["score"]) for e in board["entries"]] == expected
    assert [e["rank"] for e in board["entries"]] == [1, 2, 3]
