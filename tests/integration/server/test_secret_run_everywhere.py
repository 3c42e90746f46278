"""Issue 34.3 and 34.4 checked on every route that serves a run (test_secret_run_progress.py and
test_run_isolation_line.py check the submission's own): the owner of a running run in a phase
with secret test data reads its step only, with no heartbeat time, on the list of their
submissions and the results route too; the run's isolation line is shown to the operators
(admins, who organize nothing here) as to the phase's organizers, never to the owner."""

from __future__ import annotations

from test_pages import login
from test_run_usage import finish_failed_run
from test_secret_run_progress import _running

LINE = "own namespaces per test task; exclusive host: no other run on this host from its " \
       "pre-fault to its end (waited 0.0 s for the other slots)"


def test_no_route_gives_the_owner_more_than_the_step(env):
    submission_id, headers, _ = _running(env, "secret")
    mine = env.client.get("/api/v1/me/submissions", headers=headers).json()
    results = env.client.get(f"/api/v1/submissions/{submission_id}/results", headers=headers)
    progresses = [run["progress"] for s in mine if s["id"] == submission_id for run in s["runs"]]
    progresses += [run.get("progress") for run in results.json()["runs"]]
    assert progresses and all(p in (None, {"step": "meta_test"}) for p in progresses), progresses
    assert {"step": "meta_test"} in progresses
    login(env, headers)
    for path in (f"/submissions/{submission_id}", "/my"):
        page = env.client.get(path).text
        assert "7 of 40" not in page and "tasks_done" not in page, path
    # The owner is told their run has its worker host alone (issue 34: the phase says so).
    page = " ".join(env.client.get(f"/submissions/{submission_id}").text.split())
    assert "Each run of this phase has its worker host to itself" in page


def test_the_isolation_line_is_shown_to_operators_too(env):
    olga, _ = env.user("olga", role="organizer")
    phase = env.phase(owner=olga, leaderboard={"test_data": "secret"})
    _, ann = env.user("ann")
    _, root = env.user("root", role="admin")
    submission_id, _, answer = finish_failed_run(env, phase, ann, isolation=LINE)
    assert answer.status_code == 200, answer.text
    login(env, root)
    page = " ".join(env.client.get(f"/submissions/{submission_id}").text.split())
    assert 'id="isolation"' in page and "exclusive host: no other run" in page
    env.client.cookies.clear()
    login(env, ann)
    page = env.client.get(f"/submissions/{submission_id}").text
    assert 'id="isolation"' not in page and "exclusive host" not in page
