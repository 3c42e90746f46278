"""Organizer and participant operations: cancel, re-run, select, baseline, leaderboard views
and export, the queue, worker status, phase close and the audit log."""

from __future__ import annotations

import csv
import io

from _server_support import zip_bytes
from sqlalchemy import select

from server.models import Competition, Run
from server.services.reconcile import ReconcilePolicy, reconcile


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def organized_phase(env, **fields):
    """A phase whose competition is owned by a fresh organizer; returns (phase, org headers)."""
    org, org_headers = env.user("olga", role="organizer")
    phase = env.phase(**fields)
    with env.db.session() as s:
        s.get(Competition, phase.competition_id).owner_id = org.id
    return phase, org_headers


def run_job(env, job, score: float | None = None, dataset: str = "D1"):
    run_id, token, _ = job
    fencing = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w1"},
                              headers=auth(token)).json()["fencing_token"]
    if score is not None:
        body = {"fencing_token": fencing, "state": "finished",
                "summary": {"mean": score, "ci95": 0.1,
                            "per_dataset": {dataset: {"mean": score}}}}
        assert env.client.post(f"/internal/runs/{run_id}/finish", json=body,
                               headers=auth(token)).status_code == 200
    return fencing


def test_cancel_queued_is_immediate_and_revokes_the_run_token(env):
    phase, _ = organized_phase(env)
    _, ann = env.user("ann")
    sub = env.submit(phase.id, ann).json()
    run_id, token, _ = env.queue.jobs[-1]
    answer = env.client.post(f"/api/v1/submissions/{sub['id']}/cancel", headers=ann)
    assert answer.status_code == 200 and answer.json()["state"] == "cancelled"
    claim = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                            headers=auth(token))
    assert claim.status_code == 401
    again = env.client.post(f"/api/v1/submissions/{sub['id']}/cancel", headers=ann)
    assert again.json()["error"]["code"] == "submission.not_cancellable"


def test_cancel_running_stops_at_the_next_heartbeat_with_409_and_nothing_published(env):
    phase, org = organized_phase(env)
    _, ann = env.user("ann")
    sub = env.submit(phase.id, ann).json()
    job = env.queue.jobs[-1]
    fencing = run_job(env, job)
    answer = env.client.post(f"/api/v1/submissions/{sub['id']}/cancel", headers=org)
    assert answer.json()["runs"][0]["cancel_requested_at"] is not None
    beat = env.client.post(f"/internal/runs/{job[0]}/heartbeat", headers=auth(job[1]),
                           json={"fencing_token": fencing, "stage": "running"})
    assert beat.status_code == 409 and beat.json()["error"]["code"] == "run.cancelled"
    view = env.client.get(f"/api/v1/submissions/{sub['id']}", headers=ann).json()
    assert view["state"] == "cancelled" and view["score"] is None
    workers = env.client.get("/api/v1/admin/workers", headers=org).json()
    assert workers[0]["name"] == "w1" and workers[0]["current_run_id"] is None
    assert "submission.cancel" in {a["action"] for a in env.client.get(
        "/api/v1/admin/audit", headers=org).json()}


def test_rerun_keeps_old_runs_as_history_and_scores_from_the_new_ones(env):
    phase, org = organized_phase(env, runs_per_submission=2)
    _, ann = env.user("ann")
    sub = env.submit(phase.id, ann).json()
    for job, score in zip(env.queue.jobs[-2:], (0.5, 0.7), strict=True):
        run_job(env, job, score)
    answer = env.client.post(f"/api/v1/submissions/{sub['id']}/rerun", headers=org)
    assert answer.status_code == 200 and len(answer.json()["run_ids"]) == 2
    view = env.client.get(f"/api/v1/submissions/{sub['id']}", headers=ann).json()
    assert view["state"] == "queued" and view["score"] is None
    assert [r["superseded_at"] is not None for r in view["runs"]] == [True, True, False, False]
    assert [r["seed"] for r in view["runs"]] == [0, 1, 0, 1]
    for job, score in zip(env.queue.jobs[-2:], (0.6, 0.9), strict=True):
        run_job(env, job, score)
    assert env.client.get(f"/api/v1/submissions/{sub['id']}",
                          headers=ann).json()["score"] == 0.6
    busy = env.submit(phase.id, ann).json()
    again = env.client.post(f"/api/v1/phases/{phase.id}/rerun", headers=org).json()
    assert again["skipped"] == [busy["id"]] and again["submission_ids"] == [sub["id"]]


def test_selected_submission_represents_its_owner_over_the_rule(env):
    phase, _ = organized_phase(env, leaderboard_rule="best")
    _, ann = env.user("ann")
    ids = []
    for score in (0.8, 0.3):
        ids.append(env.submit(phase.id, ann).json()["id"])
        run_job(env, env.queue.jobs[-1], score)
    board = env.client.get(f"/api/v1/phases/{phase.id}/leaderboard").json()
    assert board["entries"][0]["submission_id"] == ids[0]
    env.client.post(f"/api/v1/submissions/{ids[1]}/select", headers=ann)
    board = env.client.get(f"/api/v1/phases/{phase.id}/leaderboard").json()
    assert [(e["submission_id"], e["is_selected"]) for e in board["entries"]] == [(ids[1], True)]


def test_average_rank_board_csv_and_hiding(env):
    phase, org = organized_phase(env, leaderboard={"ranking": "average_rank",
                                                   "hidden": "board"})
    for name, scores in (("ann", {"D1": 0.9, "D2": 0.1}), ("bob", {"D1": 0.5, "D2": 0.6}),
                         ("cid", {"D1": 0.4, "D2": 0.5})):
        _, headers = env.user(name)
        env.submit(phase.id, headers)
        run_id, token, _ = env.queue.jobs[-1]
        fencing = run_job(env, (run_id, token, ""))
        env.client.post(f"/internal/runs/{run_id}/finish", headers=auth(token), json={
            "fencing_token": fencing, "state": "finished",
            "summary": {"mean": sum(scores.values()) / 2,
                        "per_dataset": {d: {"mean": v} for d, v in scores.items()}}})
    staff = env.client.get(f"/api/v1/phases/{phase.id}/leaderboard", headers=org).json()
    assert [(e["username"], e["average_rank"]) for e in staff["entries"]] == [
        ("bob", 1.5), ("ann", 2.0), ("cid", 2.5)]
    public = env.client.get(f"/api/v1/phases/{phase.id}/leaderboard", headers=headers).json()
    assert public["hidden"] == "board" and public["entries"] == []
    text = env.client.get(f"/api/v1/phases/{phase.id}/leaderboard?format=csv", headers=org).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["username"] for r in rows] == ["bob", "ann", "cid"]
    assert rows[0]["dataset:D2"] == "0.600000"


def test_queue_view_positions_and_estimate(env):
    phase, org = organized_phase(env)
    _, ann = env.user("ann")
    env.submit(phase.id, ann)
    run_job(env, env.queue.jobs[-1])
    env.clock.advance(seconds=100)
    body = {"fencing_token": 1, "state": "finished", "summary": {"mean": 0.5}}
    run_id, token, _ = env.queue.jobs[-1]
    env.client.post(f"/internal/runs/{run_id}/finish", json=body, headers=auth(token))
    _, bob = env.user("bob")
    for _ in range(2):
        env.submit(phase.id, bob)
    entries = env.client.get("/api/v1/queue", headers=org).json()
    assert [e["position"] for e in entries] == [1, 2]
    assert entries[1]["estimated_start"] is not None
    assert env.client.get("/api/v1/queue", headers=ann).json() == []


def test_closing_twice_carries_nothing_twice_and_the_reconciler_closes_due_phases(env):
    source, org = organized_phase(env, ends_at=env.clock.now.replace(year=2031))
    with env.db.session() as s:
        from server.models import Phase

        final = Phase(competition_id=source.competition_id, name="final", status="open",
                      runs_per_submission=3, carry_from_id=source.id, created_at=env.clock.now)
        s.add(final)
    _, ann = env.user("ann")
    env.submit(source.id, ann)
    run_job(env, env.queue.jobs[-1], 0.5)
    env.clock.now = env.clock.now.replace(year=2032)
    with env.db.session(write=True) as s:
        reconcile(s, env.clock.now, env.queue, ReconcilePolicy())
    assert len(env.queue.jobs) == 4
    again = env.client.post(f"/api/v1/phases/{source.id}/close", headers=org)
    assert again.status_code == 409
    with env.db.session() as s:
        assert s.execute(select(Run).where(Run.seed == 2)).scalar_one() is not None
    direct = env.client.post(f"/api/v1/phases/{final.id}/submissions", headers=ann,
                             files={"file": ("s.zip", zip_bytes(), "application/zip")})
    assert direct.status_code == 409 and "final phase" in direct.json()["error"]["message"]
