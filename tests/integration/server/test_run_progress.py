"""A running run's progress (issue 14, item 4): the worker reports step, test tasks and a log
tail with its heartbeat; the API shows step and tasks (never the log tail, which follows the
phase's hide_logs rule); a worker holding a stale fencing token cannot overwrite it."""

from __future__ import annotations


def _claim(env, run_id: int) -> tuple[dict, int]:
    token = next(t for r, t, _q in env.queue.jobs if r == run_id)
    bearer = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", headers=bearer,
                              json={"worker": "w1"})
    assert claimed.status_code == 200, claimed.text
    return bearer, claimed.json()["fencing_token"]


def test_heartbeat_progress_is_shown_without_the_log_tail(env):
    _, headers = env.user("ann")
    phase_id = env.phase(hide_logs=True).id
    created = env.submit(phase_id, headers).json()
    run_id = created["runs"][0]["id"]
    bearer, fencing = _claim(env, run_id)
    beat = env.client.post(f"/internal/runs/{run_id}/heartbeat", headers=bearer, json={
        "fencing_token": fencing, "stage": "running",
        "progress": {"step": "meta_test", "tasks_done": 3, "tasks_total": 10,
                     "log_tail": "secret-ish line"}})
    assert beat.status_code == 200, beat.text
    view = env.client.get(f"/api/v1/submissions/{created['id']}", headers=headers).json()
    progress = view["runs"][0]["progress"]
    assert progress["step"] == "meta_test" and progress["tasks_done"] == 3
    assert "log_tail" not in progress
    from test_participant_view import _login

    _login(env, headers)
    page = env.client.get(f"/submissions/{created['id']}")
    assert "3 of 10" in page.text and "secret-ish line" not in page.text  # logs hidden here


def test_a_stale_fencing_token_cannot_overwrite_progress(env):
    from server.services.progress import record_progress

    _, headers = env.user("ann")
    created = env.submit(env.phase().id, headers).json()
    run_id = created["runs"][0]["id"]
    _bearer, fencing = _claim(env, run_id)
    with env.db.session() as s:
        record_progress(s, run_id, fencing, {"step": "meta_fit"}, env.clock.now)
        record_progress(s, run_id, fencing - 1, {"step": "meta_test"}, env.clock.now)
    view = env.client.get(f"/api/v1/submissions/{created['id']}", headers=headers).json()
    assert view["runs"][0]["progress"]["step"] == "meta_fit"
