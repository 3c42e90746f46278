"""A running run's progress (issue 14, item 4): the worker reports step, test tasks and a log
tail with its heartbeat; the API shows step and tasks (never the log tail, which follows the
phase's hide_logs rule); a worker holding a stale fencing token cannot overwrite it."""

from __future__ import annotations

import pytest


def _claim(env, run_id: int) -> tuple[dict, int]:
    token = next(t for r, t, _q in env.queue.jobs if r == run_id)
    bearer = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", headers=bearer,
                              json={"worker": "w1", "host_lock": True})  # a secret run's too
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


def _beat_with_tail(env, level: str, tail: str):
    """A submission of ann's in a phase of olga's whose test data are `level`, its run
    reported running with `tail` as the worker's live log tail."""
    olga, organizer = env.user("olga", role="organizer")
    _, headers = env.user("ann")
    phase_id = env.phase(owner=olga, leaderboard={"test_data": level}).id
    created = env.submit(phase_id, headers).json()
    run_id = created["runs"][0]["id"]
    bearer, fencing = _claim(env, run_id)
    beat = env.client.post(f"/internal/runs/{run_id}/heartbeat", headers=bearer, json={
        "fencing_token": fencing, "stage": "running",
        "progress": {"step": "meta_fit", "log_tail": tail}})
    assert beat.status_code == 200, beat.text
    return created["id"], headers, organizer


def test_the_live_tail_is_shown_to_the_owner_in_a_public_phase(env):
    from test_participant_view import _login

    submission_id, headers, _ = _beat_with_tail(env, "public",
                                                "==> meta-train <==\nepoch 3 loss 0.41\x1b[2J\n")
    _login(env, headers)
    page = env.client.get(f"/submissions/{submission_id}").text
    assert 'id="tail-0"' in page and "epoch 3 loss 0.41\\x1b[2J" in page  # controls visible
    assert "its last lines are shown above, under Log (live)" in page


@pytest.mark.parametrize("level", ["feedback", "secret"])
def test_the_live_tail_is_withheld_from_the_owner_where_meta_test_output_is(env, level):
    from test_participant_view import _login

    submission_id, headers, organizer = _beat_with_tail(env, level, "==> meta-test <==\nLEAK\n")
    _login(env, headers)
    page = env.client.get(f"/submissions/{submission_id}").text
    assert "LEAK" not in page and 'id="tail-0"' not in page
    assert "while it runs, its live log lines are shown to the organizers only" in page
    api = env.client.get(f"/api/v1/submissions/{submission_id}", headers=headers).text
    assert "LEAK" not in api
    _login(env, organizer)  # the competition's organizers read everything
    assert "LEAK" in env.client.get(f"/submissions/{submission_id}").text


def test_a_tail_with_a_nul_is_stored_and_shown_visibly(env):
    """The worker makes the tail storable; a raw NUL from an older worker still neither fails
    the heartbeat nor reaches the page as a control character."""
    from test_participant_view import _login

    submission_id, headers, _ = _beat_with_tail(env, "public", "loss\x00 0.4\n")
    _login(env, headers)
    assert "loss\\x00 0.4" in env.client.get(f"/submissions/{submission_id}").text
