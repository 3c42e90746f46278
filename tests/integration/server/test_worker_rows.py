"""The dashboard's workers (issue 32.6), against the real app: the run a worker holds comes
from live leases (a stopped worker's row said "run 5" beside the live one running it), a
silent worker shows offline, and two live processes started with one name are pointed out."""

from __future__ import annotations

from test_pages import login
from test_runs import call

from server.models import Run


def _two_runs(env) -> tuple[list[tuple[int, str]], dict]:
    phase = env.phase()
    _, headers = env.user("ann")
    for _ in range(2):
        assert env.submit(phase.id, headers).status_code == 201
    return [job[:2] for job in env.queue.jobs[-2:]], headers


def _workers(env, headers) -> dict[str, dict]:
    answer = env.client.get("/api/v1/admin/workers", headers=headers)
    assert answer.status_code == 200, answer.text
    return {w["name"]: w for w in answer.json()}


def test_a_stopped_workers_row_shows_no_run_once_its_lease_is_gone(env):
    _, admin = env.user("root", role="admin")
    (run_id, token), _ = _two_runs(env)[0]
    assert call(env, run_id, token, "claim", {"worker": "gpu/0@a:1:aa"}).status_code == 200
    assert _workers(env, admin)["gpu/0@a:1:aa"]["current_run_id"] == run_id
    env.clock.advance(minutes=10)  # it stopped: no call since, its lease lapsed
    with env.db.session() as s:
        assert s.get(Run, run_id).lease_owner == "gpu/0@a:1:aa"
    row = _workers(env, admin)["gpu/0@a:1:aa"]
    assert row["current_run_id"] is None and row["silent"]
    login(env, admin)
    page = env.client.get("/organizer").text
    assert "offline" in page and f"run {run_id} " not in page


def test_two_live_processes_with_one_name_are_pointed_out(env):
    _, admin = env.user("root", role="admin")
    jobs, _ = _two_runs(env)
    for (run_id, token), owner in zip(jobs, ["twin/0@a:1:aa", "twin/0@b:2:bb"], strict=True):
        assert call(env, run_id, token, "claim", {"worker": owner}).status_code == 200
    rows = _workers(env, admin)
    held = {rows["twin/0@a:1:aa"]["current_run_id"], rows["twin/0@b:2:bb"]["current_run_id"]}
    assert held == {run_id for run_id, _ in jobs}
    login(env, admin)
    page = " ".join(env.client.get("/organizer").text.split())
    assert "2 live processes share the name twin/0" in page


def test_a_worker_whose_runs_fall_back_to_shared_namespaces_is_pointed_out(env):
    """Issue 34.4: a host that refuses test tasks their own namespaces shows it on the workers
    view (the isolation line of its latest run), to organizers and operators."""
    from submission_api.runner.namespaces import describe

    _, admin = env.user("root", role="admin")
    (run_id, token), _ = _two_runs(env)[0]
    assert call(env, run_id, token, "claim", {"worker": "apparmor/0@a:1:aa"}).status_code == 200
    assert _workers(env, admin)["apparmor/0@a:1:aa"]["isolation"] is None
    with env.db.session() as s:
        s.get(Run, run_id).isolation = describe(False)
        s.commit()
    assert _workers(env, admin)["apparmor/0@a:1:aa"]["isolation"].startswith("shared")
    login(env, admin)
    page = " ".join(env.client.get("/organizer").text.split())
    assert "test tasks share namespaces" in page
