"""A run's isolation line (issue 34.4): the worker sends it with `finish`, the server stores it
with the run, and the submission page shows it to the phase's organizers, never to the owner."""

from __future__ import annotations

from sqlalchemy import select
from test_pages import login
from test_run_usage import finish_failed_run

from server.models import Run

LINE = ("shared namespaces (refused here: seccomp, AppArmor or the kernel); every task's "
        "leftovers swept and verified after it")


def test_the_isolation_line_is_stored_and_shown_to_organizers_only(env):
    olga, olga_headers = env.user("olga", role="organizer")
    phase = env.phase(owner=olga, hide_logs=False)
    _, ann = env.user("ann")
    submission_id, run_id, answer = finish_failed_run(env, phase, ann, isolation=LINE)
    assert answer.status_code == 200, answer.text
    with env.db.session() as s:
        assert s.execute(select(Run.isolation).where(Run.id == run_id)).scalar_one() == LINE

    login(env, olga_headers)
    page = env.client.get(f"/submissions/{submission_id}")
    assert page.status_code == 200 and 'id="isolation"' in page.text
    assert "shared namespaces (refused here" in page.text
    env.client.cookies.clear()
    login(env, ann)
    page = env.client.get(f"/submissions/{submission_id}")
    assert page.status_code == 200 and 'id="isolation"' not in page.text


def test_an_isolation_line_past_its_bound_is_refused_with_a_clear_error(env):
    phase = env.phase()
    _, ann = env.user("ann")
    env.submit(phase.id, ann)
    run_id, token, _ = env.queue.jobs[-1]
    auth = {"Authorization": f"Bearer {token}"}
    fencing = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                              headers=auth).json()["fencing_token"]
    answer = env.client.post(f"/internal/runs/{run_id}/finish", headers=auth, json={
        "fencing_token": fencing, "state": "failed", "reason": "crashed", "isolation": "x" * 5000})
    assert answer.status_code == 422 and "isolation" in answer.text
