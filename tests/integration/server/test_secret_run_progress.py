"""A running run in a phase with secret test data shows its owner only a coarse state (issue
34.5): its step, not the count of test tasks done nor the heartbeat's time, which together would
time each test task; the phase's organizers still see the whole report."""

from __future__ import annotations

import pytest
from test_participant_view import _login
from test_run_progress import _claim


def _running(env, level: str):
    olga, organizer = env.user("olga", role="organizer")
    _, headers = env.user("ann")
    phase_id = env.phase(owner=olga, hide_logs=False, leaderboard={"test_data": level}).id
    created = env.submit(phase_id, headers).json()
    run_id = created["runs"][0]["id"]
    bearer, fencing = _claim(env, run_id)
    beat = env.client.post(f"/internal/runs/{run_id}/heartbeat", headers=bearer, json={
        "fencing_token": fencing, "stage": "running",
        "progress": {"step": "meta_test", "tasks_done": 7, "tasks_total": 40}})
    assert beat.status_code == 200, beat.text
    return created["id"], headers, organizer


@pytest.mark.parametrize("level", ["feedback", "secret"])
def test_the_owner_of_a_secret_run_sees_its_step_only(env, level):
    submission_id, headers, organizer = _running(env, level)
    api = env.client.get(f"/api/v1/submissions/{submission_id}", headers=headers).json()
    assert api["runs"][0]["progress"] == {"step": "meta_test"}
    _login(env, headers)
    page = env.client.get(f"/submissions/{submission_id}").text
    assert "meta-test" in page and "7 of 40" not in page
    env.client.cookies.clear()
    _login(env, organizer)
    assert "7 of 40" in env.client.get(f"/submissions/{submission_id}").text


def test_the_owner_of_a_public_run_sees_its_tasks(env):
    submission_id, headers, _ = _running(env, "public")
    progress = env.client.get(f"/api/v1/submissions/{submission_id}",
                              headers=headers).json()["runs"][0]["progress"]
    assert (progress["step"], progress["tasks_done"], progress["tasks_total"]) == \
        ("meta_test", 7, 40)
