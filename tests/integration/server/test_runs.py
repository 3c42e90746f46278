"""The internal worker API: claim, heartbeat, finish and release under a fenced lease."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from server.models import Run, Submission, TaskResult
from server.services.seeds import compute_test_seed

TASKS = [{"id": 0, "dataset": "D1", "n_ways": 5, "n_shots": 1, "score": 0.5, "accuracy": 0.6},
         {"id": 1, "dataset": "D2", "n_ways": 2, "n_shots": 3, "score": 0.7}]


def queued_run(env, runs: int = 1):
    phase = env.phase(runs_per_submission=runs)
    _, headers = env.user("ann")
    answer = env.submit(phase.id, headers)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"], list(env.queue.jobs), headers


def call(env, run_id: int, token: str, action: str, body: dict | None = None):
    return env.client.post(f"/internal/runs/{run_id}/{action}", json=body or {},
                           headers={"Authorization": f"Bearer {token}"})


def claim(env, run_id, token, worker="w1", host_lock=False):
    """`host_lock`: the worker holds its host alone for a secret phase's run (needed for one)."""
    return call(env, run_id, token, "claim",
                {"worker": worker} | ({"host_lock": True} if host_lock else {}))


def finish_body(fencing: int, score: float = 0.6, **kw) -> dict:
    return {"fencing_token": fencing, "state": "finished", "summary": {"mean": score},
            "tasks": TASKS, "log": "hello"} | kw


def run_row(env, run_id: int) -> Run:
    with env.db.session() as s:
        return s.get(Run, run_id)


def test_claim_returns_everything_the_worker_needs(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    answer = claim(env, run_id, token)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["fencing_token"] == 1
    assert body["participant_seed"] == 0 and body["submission_root"] == ""
    assert "phase_seed" not in body and "run_seed" not in body
    assert body["test_seed"] == compute_test_seed(env.settings.seed_secret, body["phase_id"], 0)
    assert run_row(env, run_id).state == "preparing"


def test_duplicate_claim_is_refused_with_409(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    assert claim(env, run_id, token).status_code == 200
    second = claim(env, run_id, token, worker="w2")
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "run.not_claimable"
    assert run_row(env, run_id).lease_owner == "w1"


def test_wrong_run_token_is_401_and_changes_nothing(env):
    _, [(run_id, _, _)], _ = queued_run(env)
    assert claim(env, run_id, "forged").status_code == 401
    assert run_row(env, run_id).state == "queued"


def test_heartbeat_moves_forward_and_extends_the_lease(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    env.clock.advance(seconds=30)
    answer = call(env, run_id, token, "heartbeat", {"fencing_token": fencing, "stage": "running"})
    assert answer.status_code == 200
    row = run_row(env, run_id)
    assert row.state == "running"
    assert row.lease_expires_at == env.clock.now + timedelta(seconds=60)
    env.clock.advance(seconds=30)
    # A late beat naming an earlier stage holds the current token: it extends the lease and
    # never demotes the stage (D4: a 409 here made the worker throw its result away).
    back = call(env, run_id, token, "heartbeat", {"fencing_token": fencing, "stage": "preparing"})
    assert back.status_code == 200
    row = run_row(env, run_id)
    assert row.state == "running"
    assert row.lease_expires_at == env.clock.now + timedelta(seconds=60)
    stale = call(env, run_id, token, "heartbeat", {"fencing_token": fencing - 1,
                                                   "stage": "running"})
    assert stale.status_code == 409


def test_finish_stores_summary_tasks_log_and_scores_the_submission(env):
    sub_id, [(run_id, token, _)], headers = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    answer = call(env, run_id, token, "finish", finish_body(fencing))
    assert answer.status_code == 200, answer.text
    with env.db.session() as s:
        sub = s.get(Submission, sub_id)
        assert (sub.state, sub.score) == ("finished", 0.6)
        tasks = s.execute(select(TaskResult).where(TaskResult.run_id == run_id)).scalars().all()
        assert [(t.task_id, t.dataset, t.n_ways) for t in tasks] == [(0, "D1", 5), (1, "D2", 2)]
    results = env.client.get(f"/api/v1/submissions/{sub_id}/results", headers=headers).json()
    assert results["runs"][0]["tasks"][1]["score"] == 0.7
    logs = env.client.get(f"/api/v1/submissions/{sub_id}/logs", headers=headers).json()
    assert logs["runs"][0]["log"] == "hello"


def test_stale_token_finish_is_409_and_writes_nothing(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    env.clock.advance(seconds=120)  # lease lapsed: a second worker takes over
    assert claim(env, run_id, token, worker="w2").json()["fencing_token"] == fencing + 1
    stale = call(env, run_id, token, "finish", finish_body(fencing, score=0.99))
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "run.stale_lease"
    row = run_row(env, run_id)
    assert (row.state, row.score, row.log, row.lease_owner) == ("preparing", None, None, "w2")
    with env.db.session() as s:
        assert s.execute(select(TaskResult)).first() is None


@pytest.mark.parametrize("after", ["finish", "claim", "heartbeat", "release"])
def test_terminal_state_never_moves_backwards(env, after):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    assert call(env, run_id, token, "finish", finish_body(fencing, state="failed",
                reason="fit_error", message="boom", summary={})).status_code == 200
    env.clock.advance(hours=1)
    bodies = {"finish": finish_body(fencing), "claim": {"worker": "w9"},
              "heartbeat": {"fencing_token": fencing, "stage": "running"},
              "release": {"fencing_token": fencing, "error": "x"}}
    assert call(env, run_id, token, after, bodies[after]).status_code == 409
    row = run_row(env, run_id)
    assert (row.state, row.reason, row.message) == ("failed", "fit_error", "boom")


def test_finished_run_without_a_score_is_refused_before_writing(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    answer = call(env, run_id, token, "finish", finish_body(fencing, summary={}))
    assert answer.status_code == 422
    assert run_row(env, run_id).state == "preparing"


def test_release_requeues_with_a_fresh_token_and_the_old_one_stops_working(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    answer = call(env, run_id, token, "release", {"fencing_token": fencing, "error": "disk full"})
    assert answer.json() == {"run_id": run_id, "state": "queued", "requeued": True}
    (_, new_token, _) = env.queue.jobs[-1]
    assert new_token != token
    assert claim(env, run_id, token).status_code == 401
    assert claim(env, run_id, new_token).json()["fencing_token"] == fencing + 2
    assert run_row(env, run_id).platform_failures == 1


def test_too_many_platform_failures_fail_the_run_as_platform_error(env):
    sub_id, [(run_id, token, _)], _ = queued_run(env)
    for _ in range(env.settings.max_platform_failures):
        fencing = claim(env, run_id, token).json()["fencing_token"]
        assert call(env, run_id, token, "release",
                    {"fencing_token": fencing, "error": "node lost"}).status_code == 200
        token = env.queue.jobs[-1][1]
    row = run_row(env, run_id)
    assert (row.state, row.reason) == ("failed", "platform_error")
    assert "not charged" in row.message
    with env.db.session() as s:
        assert s.get(Submission, sub_id).reason == "platform_error"


def test_submission_score_is_the_worst_run(env):
    sub_id, jobs, _ = queued_run(env, runs=3)
    for (run_id, token, _), score in zip(jobs, [0.8, 0.4, 0.6], strict=True):
        fencing = claim(env, run_id, token).json()["fencing_token"]
        assert call(env, run_id, token, "finish", finish_body(fencing, score)).status_code == 200
    with env.db.session() as s:
        assert s.get(Submission, sub_id).score == 0.4


def test_submission_zip_and_datasets_need_the_run_token(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    ok = env.client.get(f"/internal/runs/{run_id}/submission",
                        headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and ok.content[:2] == b"PK"
    assert env.client.get(f"/internal/runs/{run_id}/submission").status_code == 401
