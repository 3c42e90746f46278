"""Issue 34, through the real routes on Postgres: a worker's start-up isolation probe travels with
its claims, heartbeats and pool job requests, is stored on its row (migration 0016) and shown on
the workers API and the operators' workers view before any run of it ends; and the claim of a
secret phase's run tells the worker to run it alone on its host (`exclusive_host`)."""

from __future__ import annotations

from test_pages import login
from test_runs import call
from test_worker_pools import POOL, tenant
from test_worker_rows import _workers

from server.models import Worker


def _job(env, phase_id: int) -> tuple[int, str]:
    _, headers = env.user(f"p{phase_id}")
    assert env.submit(phase_id, headers).status_code == 201
    run_id, token, _ = env.queue.jobs[-1]
    return run_id, token


def test_a_claim_and_a_heartbeat_carry_the_probe_to_the_workers_view(env):
    _, admin = env.user("root", role="admin")
    run_id, token = _job(env, env.phase().id)
    claimed = call(env, run_id, token, "claim", {"worker": "aa/0@h:1:aa",
                                                 "task_isolation": "shared"})
    assert claimed.status_code == 200, claimed.text
    row = _workers(env, admin)["aa/0@h:1:aa"]
    assert row["task_isolation"] == "shared" and row["isolation"] is None  # no run ended yet
    login(env, admin)
    page = " ".join(env.client.get("/organizer").text.split())
    assert "test tasks share namespaces (start-up probe)" in page
    env.client.cookies.clear()

    # The host was fixed and the worker restarted under the same name: its next beat says so;
    # a beat that does not know (its probe still runs) changes nothing.
    fencing = claimed.json()["fencing_token"]
    beat = call(env, run_id, token, "heartbeat", {"fencing_token": fencing, "stage": "running",
                                                  "task_isolation": "own"})
    assert beat.status_code == 200, beat.text
    assert _workers(env, admin)["aa/0@h:1:aa"]["task_isolation"] == "own"
    beat = call(env, run_id, token, "heartbeat", {"fencing_token": fencing, "stage": "running"})
    assert beat.status_code == 200, beat.text
    with env.db.session() as s:
        assert s.query(Worker).filter_by(name="aa/0@h:1:aa").one().task_isolation == "own"
    login(env, admin)
    assert "share namespaces" not in env.client.get("/organizer").text


def test_a_pool_workers_job_request_carries_it(env):
    _, admin = env.user("root", role="admin")
    pool = tenant(env, "iso")
    answer = env.client.post("/internal/pool/jobs", headers={POOL: pool.token},
                             json={"worker": "gpu-1/0", "task_isolation": "shared"})
    assert answer.status_code == 204, answer.text
    assert _workers(env, admin)["gpu-1/0"]["task_isolation"] == "shared"
    # The pool's organizer, whose own host it is, reads it on the pool's API and page too.
    detail = env.client.get(f"/api/v1/pools/{pool.pool_id}", headers=pool.headers).json()
    assert [w["task_isolation"] for w in detail["workers"]] == ["shared"]
    login(env, pool.headers)
    page = " ".join(env.client.get(f"/organizer/pools/{pool.pool_id}").text.split())
    assert "test tasks share namespaces" in page


def test_an_unknown_value_is_refused_saying_what_is_expected(env):
    run_id, token = _job(env, env.phase().id)
    answer = call(env, run_id, token, "claim", {"worker": "w", "task_isolation": "maybe"})
    assert answer.status_code == 422 and "task_isolation" in answer.text
    assert "own" in answer.text and "shared" in answer.text


def test_the_claim_of_a_secret_phases_run_asks_for_an_exclusive_host(env):
    answers = {}
    for level in ("public", "feedback", "secret"):
        run_id, token = _job(env, env.phase(leaderboard={"test_data": level}).id)
        claimed = call(env, run_id, token, "claim",
                       {"worker": f"w-{level}", "host_lock": level == "secret"})
        assert claimed.status_code == 200, claimed.text
        answers[level] = claimed.json()["exclusive_host"]
    run_id, token = _job(env, env.phase(name="final").id)  # secret by default
    answers["final"] = call(env, run_id, token, "claim",
                            {"worker": "w-final", "host_lock": True}).json()["exclusive_host"]
    assert answers == {"public": False, "feedback": False, "secret": True, "final": True}
