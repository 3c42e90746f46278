"""Issue 21: a worker whose own resources fail (full disk, Docker engine gone) stops claiming and
says so on the workers page. It sends its reason with the claim it withholds (authenticated by
the run token like any claim): the server records it, leases nothing (409 `worker.unhealthy`),
and the organizer dashboard and /admin/workers show the worker unhealthy until one of its
claims goes through."""

from __future__ import annotations

from test_runs import call, queued_run

from server.models import Run

REASON = ("worker 'gpu-3/0' cannot reach its Docker engine (ConnectionError: connection "
          "refused); it claims no run until the engine answers (scripts/ensure_docker.sh)")


def row_of(page: str, name: str) -> str:
    page = page[page.index("<h2>Workers</h2>"):]
    row = page[page.index(f"<code>{name}</code>"):]
    return row[:row.index("</tr>")]


def test_an_unhealthy_worker_claims_nothing_and_the_workers_page_says_why(env):
    from test_pages import login as page_login

    _, [(run_id, token, _)], _ = queued_run(env)
    withheld = call(env, run_id, token, "claim", {"worker": "gpu-3/0", "unhealthy": REASON})
    assert withheld.status_code == 409, withheld.text
    assert withheld.json()["error"]["code"] == "worker.unhealthy"
    with env.db.session() as s:
        run = s.get(Run, run_id)
        assert (run.state, run.lease_owner) == ("queued", None)  # untouched, still claimable

    _, admin = env.user("root", role="admin")
    [worker] = env.client.get("/api/v1/admin/workers", headers=admin).json()
    assert (worker["name"], worker["unhealthy"]) == ("gpu-3/0", REASON)
    assert worker["unhealthy_at"] is not None
    page_login(env, admin)
    row = row_of(env.client.get("/organizer").text, "gpu-3/0")
    assert "unhealthy" in row and "cannot reach its Docker engine" in row, row

    # Organizers see the state, not the host's paths and errors (operators only).
    _, org = env.user("olga", role="organizer")
    [seen] = env.client.get("/api/v1/admin/workers", headers=org).json()
    assert seen["unhealthy"] and "Docker" not in seen["unhealthy"]
    assert "admin/workers" in seen["unhealthy"]

    # Healthy again: its next claim goes through and clears the state.
    assert call(env, run_id, token, "claim", {"worker": "gpu-3/0"}).status_code == 200
    [worker] = env.client.get("/api/v1/admin/workers", headers=admin).json()
    assert (worker["unhealthy"], worker["unhealthy_at"]) == (None, None)
    row = row_of(env.client.get("/organizer").text, "gpu-3/0")
    assert "unhealthy" not in row and "alive" in row, row
