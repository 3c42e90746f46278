"""A run's usage (issue 38.6): the worker sends per-stage CPU time, peak memory and stage marks
with `finish` as typed fields, the server stores them with the run, and the submission page
shows them to the phase's organizers, never to the participant of a secret phase."""

from __future__ import annotations

from sqlalchemy import select
from test_pages import login

from server.models import Run

T0 = 1_800_000_000.0
USAGE = {
    "stages": [{"stage": "meta-train", "wall_s": 12.5, "cpu_s": 11.25, "peak_memory_mb": 812.5,
                "stall_s": 0.5},
               {"stage": "meta-test", "wall_s": 30.0, "cpu_s": 27.75, "peak_memory_mb": 1415.0,
                "stall_s": 2.25}],
    "tasks": {"count": 40, "first_s": 0.9, "median_s": 0.6, "p90_s": 0.8, "max_s": 1.25,
              "slowest_task": 17},
    "marks": [{"name": name, "at": T0 + offset} for name, offset in (
        ("meta_train_container_start", 0), ("meta_train_end", 12.6),
        ("meta_test_container_start", 12.8), ("supervisor_start", 14.1),
        ("meta_test_end", 43.0), ("scoring_start", 43.1), ("scoring_end", 43.4),
        ("publish", 43.5))]}


def finish_failed_run(env, phase, user, **fields):
    """Upload, claim and finish one run as `crashed` with the finish body's extra `fields`;
    returns (submission id, run id, the finish answer)."""
    submission_id = env.submit(phase.id, user).json()["id"]
    run_id, token, _ = env.queue.jobs[-1]
    auth = {"Authorization": f"Bearer {token}"}
    fencing = env.client.post(f"/internal/runs/{run_id}/claim",  # a secret run's too
                              json={"worker": "w", "host_lock": True},
                              headers=auth).json()["fencing_token"]
    answer = env.client.post(f"/internal/runs/{run_id}/finish", headers=auth, json={
        "fencing_token": fencing, "state": "failed", "reason": "crashed",
        "message": "the process of test task 0 exited with code 1", **fields})
    return submission_id, run_id, answer


def test_usage_is_stored_and_shown_to_organizers_not_to_a_secret_phases_participant(env):
    olga, olga_headers = env.user("olga", role="organizer")
    phase = env.phase(owner=olga, leaderboard={"test_data": "secret"})
    _, ann = env.user("ann")
    submission_id, run_id, answer = finish_failed_run(env, phase, ann, usage=USAGE)
    assert answer.status_code == 200, answer.text
    with env.db.session() as s:
        stored = s.execute(select(Run.usage).where(Run.id == run_id)).scalar_one()
    assert stored["stages"][1] == USAGE["stages"][1]
    assert [m["name"] for m in stored["marks"]] == [m["name"] for m in USAGE["marks"]]

    login(env, olga_headers)
    page = env.client.get(f"/submissions/{submission_id}")
    assert page.status_code == 200 and 'id="run-usage"' in page.text
    assert "39.00 s CPU" in page.text and "peak 1415.0 MB" in page.text
    assert "+14.10 s: supervisor started" in page.text
    assert "+43.50 s: result sent to the server" in page.text
    # issue 38.3: the time it waited for a core, and each test task's time (a summary)
    assert ">2.25<" in page.text and "40 test tasks" in page.text
    assert "slowest 1.250 s (task 17)" in page.text
    env.client.cookies.clear()
    login(env, ann)
    page = env.client.get(f"/submissions/{submission_id}")
    assert page.status_code == 200 and 'id="run-usage"' not in page.text
    assert "1415.0" not in page.text and "supervisor started" not in page.text


def test_usage_of_a_wrong_shape_is_refused_with_a_clear_error(env):
    phase = env.phase()
    _, ann = env.user("ann")
    bad = {"stages": [{"stage": "meta-train", "wall_s": -1.0}], "marks": []}
    _, _, answer = finish_failed_run(env, phase, ann, usage=bad)
    assert answer.status_code == 422 and "wall_s" in answer.text, answer.text
    _, _, answer = finish_failed_run(env, phase, ann,
                                 usage={"stages": [], "marks": [{"name": "lunch", "at": T0}]})
    assert answer.status_code == 422 and "name" in answer.text, answer.text
