"""Worker pools (issue 37) through the real routes on Postgres: a pool credential opens only its
own pool's runs, by every internal route the app serves; revoking stops the next call; pool runs
never reach the broker; what a pool's owner sees holds nothing of another pool."""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlalchemy
from _server_support import Env
from fastapi import FastAPI, routing

from server.models import Run, User
from server.services.reconcile import ReconcilePolicy, reconcile
from server.services.runs import LeasePolicy
from submission_api.scoring import TaskRecord, summarize_run

POOL = "X-Arena-Pool-Token"


@dataclass
class Tenant:
    organizer: User
    headers: dict[str, str]
    phase_id: int
    competition_id: int
    pool_id: int
    token: str


def tenant(env: Env, name: str) -> Tenant:
    """An organizer with a competition whose phase is served by their pool."""
    organizer, headers = env.user(f"org-{name}", role="organizer")
    phase = env.phase(organizer)
    made = env.client.post(f"/api/v1/competitions/{phase.competition_id}/pools",
                           headers=headers, json={"name": f"gpus-{name}"})
    assert made.status_code == 201, made.text
    pool_id = made.json()["pool"]["id"]
    attached = env.client.put(f"/api/v1/phases/{phase.id}/pool", headers=headers,
                              json={"pool_id": pool_id})
    assert attached.status_code == 200, attached.text
    return Tenant(organizer, headers, phase.id, phase.competition_id, pool_id,
                  made.json()["token"])


def submit(env: Env, phase_id: int, who: str) -> int:
    _user, headers = env.user(who)
    answer = env.submit(phase_id, headers)
    assert answer.status_code == 201, answer.text
    return answer.json()["runs"][0]["id"]


def take(env: Env, pool: Tenant, worker: str = "w1") -> tuple[int, str] | None:
    answer = env.client.post("/internal/pool/jobs", headers={POOL: pool.token},
                             json={"worker": worker, "host": f"{worker}.lab", "gpus": ["A100"],
                                   "images": ["arena-sandbox:latest"]})
    if answer.status_code == 204:
        return None
    assert answer.status_code == 200, answer.text
    return answer.json()["run_id"], answer.json()["run_token"]


def claim(env: Env, run_id: int, run_token: str, pool_token: str | None, worker: str = "w1"):
    headers = {"Authorization": f"Bearer {run_token}"} | ({POOL: pool_token} if pool_token
                                                          else {})
    return env.client.post(f"/internal/runs/{run_id}/claim", headers=headers,
                           json={"worker": worker})


def snapshot(env: Env) -> list:
    """Every row a worker's call could change."""
    with env.db.engine.connect() as conn:
        return [conn.execute(sqlalchemy.text(f"SELECT * FROM {table} ORDER BY 1")).all()
                for table in ("runs", "workers", "pool_offers", "pool_credentials",
                              "submissions", "task_results")]


def internal_routes(env: Env) -> list[tuple[str, str]]:
    """Every internal route the app serves (a route added later is covered at once)."""
    app: FastAPI = env.client.app  # type: ignore[assignment]
    routes = sorted({(method, str(context.path))
                     for context in routing.iter_route_contexts(app.routes)
                     for method in context.methods or () if method != "HEAD"
                     and str(context.path).startswith("/internal/")})
    assert len(routes) >= 7
    return routes


def finish(env: Env, pool: Tenant, run_id: int, run_token: str, fencing_token: int) -> None:
    records = [TaskRecord(id=i, dataset="d", group="test", n_ways=2, n_shots=1, score=0.5,
                          accuracy=0.5, worst_class_accuracy=0.4) for i in range(2)]
    done = env.client.post(f"/internal/runs/{run_id}/finish", json={
        "fencing_token": fencing_token, "state": "finished",
        "summary": summarize_run(records).to_dict(), "tasks": [r.to_dict() for r in records]},
        headers={"Authorization": f"Bearer {run_token}", POOL: pool.token})
    assert done.status_code == 200, done.text


def test_a_pool_credential_opens_nothing_of_another_pool_or_a_shared_phase(env):
    a, b = tenant(env, "a"), tenant(env, "b")
    shared = env.phase()
    b_run = submit(env, b.phase_id, "pb")
    shared_run = submit(env, shared.id, "ps")
    b_job = take(env, b)
    assert b_job is not None and b_job[0] == b_run
    assert claim(env, *b_job, b.token, "wb").status_code == 200
    shared_token = next(t for r, t, _q in env.queue.jobs if r == shared_run)
    assert claim(env, shared_run, shared_token, None, "shared").status_code == 200
    submit(env, b.phase_id, "pb2")  # a queued run of B that A must not be handed
    before = snapshot(env)
    refused = []
    for method, path in internal_routes(env):
        if path == "/internal/pool/jobs":
            answer = env.client.post(path, headers={POOL: a.token}, json={"worker": "wa"})
            assert answer.status_code == 204, answer.text  # B's and the shared runs: not A's
            continue
        for run_id, token in ((b_run, b_job[1]), (shared_run, shared_token)):
            url = re.sub(r"{run_id}", str(run_id), path).replace("{content_hash}", "ab" * 32)
            answer = env.client.request(method, url, json={}, headers={
                "Authorization": f"Bearer {token}", POOL: a.token})
            refused.append((method, path, answer.status_code))
            assert answer.status_code == 403, (method, url, answer.text)
            assert answer.json()["error"]["code"] == "pool.forbidden"
    assert len(refused) >= 2 * 6
    after = snapshot(env)
    # The job poll above is A's worker's heartbeat: its own row and credential only.
    assert after[0] == before[0] and after[2] == before[2] and after[4:] == before[4:]
    assert [w for w in after[1] if "wa" not in w] == before[1]


def test_a_shared_worker_cannot_touch_a_pool_run(env):
    a = tenant(env, "a")
    run_id = submit(env, a.phase_id, "p")
    job = take(env, a)
    assert job is not None
    answer = claim(env, job[0], job[1], None, "shared")
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "pool.forbidden"
    assert claim(env, job[0], job[1], a.token).status_code == 200
    with env.db.session() as s:
        assert s.get(Run, run_id).lease_owner == "w1"


def test_revoking_a_credential_stops_its_workers_next_call(env):
    a = tenant(env, "a")
    submit(env, a.phase_id, "p")
    run_id, token = take(env, a)
    claimed = claim(env, run_id, token, a.token)
    assert claimed.status_code == 200
    detail = env.client.get(f"/api/v1/pools/{a.pool_id}", headers=a.headers).json()
    credential_id = detail["credentials"][0]["id"]
    revoked = env.client.post(f"/api/v1/pools/{a.pool_id}/tokens/{credential_id}/revoke",
                              headers=a.headers)
    assert revoked.status_code == 200
    before = snapshot(env)
    beat = env.client.post(f"/internal/runs/{run_id}/heartbeat", json={
        "fencing_token": claimed.json()["fencing_token"], "stage": "running"},
        headers={"Authorization": f"Bearer {token}", POOL: a.token})
    assert beat.status_code == 401 and beat.json()["error"]["code"] == "pool.revoked"
    poll = env.client.post("/internal/pool/jobs", headers={POOL: a.token},
                           json={"worker": "w1"})
    assert poll.status_code == 401 and poll.json()["error"]["code"] == "pool.revoked"
    assert snapshot(env) == before
    again = env.client.post(f"/api/v1/pools/{a.pool_id}/tokens/{credential_id}/revoke",
                            headers=a.headers)
    assert again.status_code == 200  # idempotent
    fresh = env.client.post(f"/api/v1/pools/{a.pool_id}/tokens", headers=a.headers)
    assert fresh.status_code == 201 and fresh.json()["token"].startswith("arena_pool_")
    assert take(env, Tenant(**{**a.__dict__, "token": fresh.json()["token"]})) is None


def test_pool_runs_never_reach_the_broker(env):
    a = tenant(env, "a")
    shared = env.phase()
    run_id = submit(env, a.phase_id, "p")
    shared_run = submit(env, shared.id, "q")
    assert [r for r, _t, _q in env.queue.jobs] == [shared_run]
    job = take(env, a)
    claimed = claim(env, *job, a.token)
    # A platform fault: back to queued, handed out again after its back-off, not enqueued.
    released = env.client.post(f"/internal/runs/{run_id}/release", json={
        "fencing_token": claimed.json()["fencing_token"], "error": "disk"},
        headers={"Authorization": f"Bearer {job[1]}", POOL: a.token})
    assert released.status_code == 200 and released.json()["requeued"], released.text
    assert take(env, a) is None  # within the back-off
    env.clock.advance(seconds=env.settings.release_backoff_max_s + 1)
    job = take(env, a)
    assert job is not None and job[0] == run_id
    assert claim(env, *job, a.token).status_code == 200
    # The worker vanishes: its lease lapses; the reconciler requeues the run, sends nothing.
    env.clock.advance(seconds=env.settings.lease_seconds + 1)
    policy = ReconcilePolicy(requeue_after_s=0, lost_after_s=0,
                             lease=LeasePolicy(lease_seconds=60, max_platform_failures=5))
    with env.db.session() as s:
        report = reconcile(s, env.clock.now, env.queue, policy)
    assert report.expired == [run_id]
    env.clock.advance(seconds=3600)
    with env.db.session() as s:  # queued for an hour: still not "lost" from any broker
        report = reconcile(s, env.clock.now, env.queue, policy)
    assert run_id not in report.requeued
    job = take(env, a)
    claimed = claim(env, *job, a.token)
    finish(env, a, *job, claimed.json()["fencing_token"])
    rerun = env.client.post(f"/api/v1/phases/{a.phase_id}/rerun", headers=a.headers)
    assert rerun.status_code == 200, rerun.text
    again = take(env, a)
    assert again is not None and again[0] != run_id  # the rerun's run: for the pool
    assert {r for r, _t, _q in env.queue.jobs} == {shared_run}  # resent by the reconciler


def test_attaching_kills_broker_jobs_and_detaching_enqueues_again(env):
    organizer, headers = env.user("org", role="organizer")
    phase = env.phase(organizer)
    run_id = submit(env, phase.id, "p")
    old_token = next(t for r, t, _q in env.queue.jobs if r == run_id)
    pool = env.client.post(f"/api/v1/competitions/{phase.competition_id}/pools",
                           headers=headers, json={"name": "gpus"}).json()
    env.client.put(f"/api/v1/phases/{phase.id}/pool", headers=headers,
                   json={"pool_id": pool["pool"]["id"]})
    assert claim(env, run_id, old_token, None, "shared").status_code == 401
    assert env.client.put(f"/api/v1/phases/{phase.id}/pool", headers=headers,
                          json={"pool_id": None}).status_code == 200
    new_token = [t for r, t, _q in env.queue.jobs if r == run_id][-1]
    assert new_token != old_token
    assert claim(env, run_id, new_token, None, "shared").status_code == 200


def test_jobs_go_oldest_first_one_worker_each_and_only_to_their_pool(env):
    a, b = tenant(env, "a"), tenant(env, "b")
    first, second = submit(env, a.phase_id, "p1"), submit(env, a.phase_id, "p2")
    submit(env, b.phase_id, "p3")
    assert take(env, a, "w1")[0] == first
    assert take(env, a, "w2")[0] == second  # the first is held for w1's claim
    assert take(env, a, "w3") is None
    env.clock.advance(seconds=61)  # w1 never claimed: handed to another, with a new token
    job = take(env, a, "w3")
    assert job is not None and job[0] == first


def test_the_owner_sees_their_pool_and_nothing_of_another(env):
    a, b = tenant(env, "a"), tenant(env, "b")
    submit(env, a.phase_id, "p1")
    submit(env, b.phase_id, "p2")
    submit(env, b.phase_id, "p3")
    job = take(env, a, "wa")
    assert claim(env, *job, a.token, "wa").status_code == 200
    take(env, b, "wb")
    detail = env.client.get(f"/api/v1/pools/{a.pool_id}", headers=a.headers)
    assert detail.status_code == 200
    body = detail.json()
    assert [w["name"] for w in body["workers"]] == ["wa"]
    assert body["workers"][0] | {"last_seen_at": None} == {
        "name": "wa", "host": "wa.lab", "gpus": ["A100"], "images": ["arena-sandbox:latest"],
        "last_seen_at": None, "current_run_id": job[0], "health": "live", "unhealthy": None,
        "host_lock": False,
        "task_isolation": None}
    assert body["queue"]["queued"] == 0 and body["phases"] == [
        {"id": a.phase_id, "name": "dev"}]
    b_queue = env.client.get(f"/api/v1/pools/{b.pool_id}", headers=b.headers).json()["queue"]
    assert b_queue["queued"] == 2
    assert env.client.get(f"/api/v1/pools/{b.pool_id}", headers=a.headers).status_code == 404
    assert env.client.get(f"/api/v1/competitions/{b.competition_id}/pools",
                          headers=a.headers).status_code == 404
    foreign = env.client.put(f"/api/v1/phases/{a.phase_id}/pool", headers=a.headers,
                             json={"pool_id": b.pool_id})
    assert foreign.status_code == 404
    shared_view = env.client.get("/api/v1/admin/workers", headers=a.headers).json()
    assert shared_view == []  # pool workers are on their pool's page only
    _admin, admin = env.user("root", role="admin")
    names = {w["name"]: w["pool_id"] for w in
             env.client.get("/api/v1/admin/workers", headers=admin).json()}
    assert names == {"wa": a.pool_id, "wb": b.pool_id}
    listed = env.client.get("/api/v1/admin/pools", headers=admin).json()
    assert sorted(p["id"] for p in listed) == [a.pool_id, b.pool_id]


def test_a_phase_without_a_live_worker_says_so(env):
    a = tenant(env, "a")
    _user, participant = env.user("p")
    env.submit(a.phase_id, participant)
    seen = env.client.get(f"/api/v1/phases/{a.phase_id}", headers=participant).json()
    assert seen["serving"] == {"pool": True, "live_workers": 0, "queue_position": 1,
                               "message": "no worker is serving this phase"}
    take(env, a, "w1")
    seen = env.client.get(f"/api/v1/phases/{a.phase_id}", headers=participant).json()
    assert seen["serving"]["live_workers"] == 1 and seen["serving"]["message"] is None
    env.clock.advance(seconds=91)
    seen = env.client.get(f"/api/v1/phases/{a.phase_id}").json()
    assert seen["serving"] == {"pool": True, "live_workers": 0, "queue_position": None,
                               "message": "no worker is serving this phase"}
    shared = env.phase()
    assert env.client.get(f"/api/v1/phases/{shared.id}").json()["serving"]["pool"] is False


def test_worker_names_are_unique_per_pool_not_globally(env):
    a, b = tenant(env, "a"), tenant(env, "b")
    take(env, a, "gpu-1")
    take(env, b, "gpu-1")
    with env.db.session() as s:
        rows = s.execute(sqlalchemy.text(
            "SELECT pool_id FROM workers WHERE name = 'gpu-1' ORDER BY pool_id")).scalars().all()
    assert rows == [a.pool_id, b.pool_id]


def test_workers_asking_at_once_get_different_runs(env):
    from concurrent.futures import ThreadPoolExecutor

    a = tenant(env, "a")
    runs = {submit(env, a.phase_id, f"p{i}") for i in range(4)}
    with ThreadPoolExecutor(4) as pool:
        jobs = list(pool.map(lambda i: take(env, a, f"w{i}"), range(4)))
    assert sorted(job[0] for job in jobs if job) == sorted(runs)


def test_a_pool_queues_in_its_own_line_and_promises_nothing_without_a_worker(env):
    a = tenant(env, "a")
    shared = env.phase()
    submit(env, shared.id, "s1")
    job = take(env, a)  # A's worker is live (nothing to take yet)
    assert job is None
    first = submit(env, a.phase_id, "p1")
    job = take(env, a)
    claimed = claim(env, *job, a.token)
    env.clock.advance(seconds=30)
    finish(env, a, *job, claimed.json()["fencing_token"])
    assert first == job[0]
    _user, participant = env.user("p2")
    upload = env.submit(a.phase_id, participant).json()
    _admin, admin = env.user("root", role="admin")
    take(env, a)  # live again; the run is offered, still queued
    entries = {e["run_id"]: e for e in env.client.get("/api/v1/queue", headers=admin).json()}
    mine = entries[upload["runs"][0]["id"]]
    assert mine["queue"] == f"pool:{a.pool_id}" and mine["position"] == 1
    assert mine["estimated_start"] is not None
    seen = env.client.get(f"/api/v1/submissions/{upload['id']}", headers=participant).json()
    assert seen["queue_position"] == 1  # the older shared run waits in another line
    env.clock.advance(seconds=91)  # no live worker any more: no estimate
    entries = {e["run_id"]: e for e in env.client.get("/api/v1/queue", headers=admin).json()}
    assert entries[upload["runs"][0]["id"]]["estimated_start"] is None


def test_a_phase_image_is_checked_against_shared_workers_and_its_own_pools_only(env):
    """Another competition's pool neither serves a phase nor may have its images named to this
    organizer: before, every worker's images were counted and listed in the refusal."""
    a = tenant(env, "a")
    assert take(env, a) is None  # its worker reports ["arena-sandbox:latest"], nothing queued
    _, b_headers = env.user("org-b", role="organizer")
    made = env.client.post("/api/v1/competitions", headers=b_headers, json={
        "slug": "b-comp", "title": "B", "phases": [{"name": "dev", "image": "lab/nope:1"}]})
    assert made.status_code == 201, made.text  # no worker that may serve it reported images
    assert "arena-sandbox" not in made.text
    own = env.client.post(f"/api/v1/competitions/{a.competition_id}/phases", headers=a.headers,
                          json={"name": "final", "image": "lab/nope:1"})
    assert own.status_code == 422, own.text  # a's own pool reported its images: checked
    assert own.json()["error"]["code"] == "phase.unknown_image"
    assert "arena-sandbox:latest" in own.json()["error"]["message"]
    fits = env.client.post(f"/api/v1/competitions/{a.competition_id}/phases", headers=a.headers,
                           json={"name": "final2", "image": "arena-sandbox:latest"})
    assert fits.status_code == 201, fits.text
