"""A run of a phase with secret test data goes only to a worker that says it holds its host
alone for it (`host_lock` in its claim or pool job request; worker/host_lock.py). A worker older
than the host lock ignores the claim's `exclusive_host` and would run it beside other runs, whose
page-cache and dentry traces it could read; the server could not tell. Now such a worker's claim
of a secret run answers 409 `worker.no_host_lock` leasing nothing, the run is offered again (a
fresh token, after a pause) and says why it waits; a pool worker without it is handed other runs
or none. Ordinary runs are claimed as before by claims that send no `host_lock`. The workers
views show which workers say so. Real routes, real Postgres."""

from __future__ import annotations

from _server_support import Env
from test_pages import login
from test_worker_pools import POOL, Tenant, submit, tenant

from server.models import Phase, Run, Worker
from server.services.runs import WAITING_FOR_HOST_LOCK

SECRET = {"leaderboard": {"test_data": "secret"}}
NO_LOCK_TAG = "no host lock: no secret-phase runs"


def claim(env: Env, run_id: int, token: str, worker: str, pool_token: str | None = None,
          **extra):
    headers = {"Authorization": f"Bearer {token}"} | ({POOL: pool_token} if pool_token else {})
    return env.client.post(f"/internal/runs/{run_id}/claim", headers=headers,
                           json={"worker": worker} | extra)


def job_of(env: Env, run_id: int) -> tuple[str, float]:
    """The token and countdown of the run's latest job."""
    index = max(i for i, job in enumerate(env.queue.jobs) if job[0] == run_id)
    return env.queue.jobs[index][1], env.queue.countdowns[index]


def admin_workers(env: Env) -> tuple[dict[str, dict], str]:
    """The workers API's rows by name, and the operators' page."""
    _, headers = env.user("root", role="admin")
    answer = env.client.get("/api/v1/admin/workers", headers=headers)
    assert answer.status_code == 200, answer.text
    login(env, headers)
    return {w["name"]: w for w in answer.json()}, env.client.get("/organizer").text


def test_a_secret_run_waits_for_a_worker_that_holds_its_host_alone(env):
    secret = env.phase(**SECRET)
    _, ann = env.user("ann")
    made = env.submit(secret.id, ann)
    assert made.status_code == 201, made.text
    submission_id, run_id = made.json()["id"], made.json()["runs"][0]["id"]
    old_token, _ = job_of(env, run_id)
    refused = claim(env, run_id, old_token, "old-worker")  # no host_lock: older than it
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "worker.no_host_lock"
    assert "secret test data" in error["message"] and "upgrade" in error["message"]
    with env.db.session() as s:
        run = s.get(Run, run_id)
        assert (run.state, run.attempts, run.platform_failures, run.lease_owner) == (
            "queued", 0, 0, None)
        assert run.message == WAITING_FOR_HOST_LOCK
    # Offered again after a pause, with a fresh token: the old job, redelivered, is dropped.
    new_token, countdown = job_of(env, run_id)
    assert new_token != old_token and countdown > 0
    assert claim(env, run_id, old_token, "old-worker").status_code == 401
    seen = env.client.get(f"/api/v1/submissions/{submission_id}", headers=ann).json()
    assert seen["runs"][0]["state"] == "queued"
    assert seen["runs"][0]["message"] == WAITING_FOR_HOST_LOCK  # its owner sees why it waits
    workers, page = admin_workers(env)
    assert workers["old-worker"]["host_lock"] is False
    assert page.count(NO_LOCK_TAG) == 1  # the old worker's row says why it gets none
    taken = claim(env, run_id, new_token, "new-worker", host_lock=True)
    assert taken.status_code == 200, taken.text
    assert taken.json()["exclusive_host"] is True
    with env.db.session() as s:
        run = s.get(Run, run_id)
        assert (run.state, run.lease_owner, run.message) == ("preparing", "new-worker", None)
        assert s.query(Worker).filter_by(name="new-worker").one().host_lock is True


def test_an_ordinary_run_is_claimed_without_the_host_lock_as_before(env):
    public = env.phase()
    run_id = submit(env, public.id, "ann")
    token, _ = job_of(env, run_id)
    taken = claim(env, run_id, token, "old-worker")
    assert taken.status_code == 200, taken.text
    assert taken.json()["exclusive_host"] is False
    assert len(env.queue.jobs) == 1  # nothing offered again


def test_a_secret_run_is_refused_only_while_queued(env):
    """A redelivered job of a run a capable worker holds is refused without touching it."""
    secret = env.phase(name="final")  # a final phase's test data are secret by default
    run_id = submit(env, secret.id, "ann")
    token, _ = job_of(env, run_id)
    assert claim(env, run_id, token, "new-worker", host_lock=True).status_code == 200
    refused = claim(env, run_id, token, "old-worker")
    assert refused.status_code == 409
    assert len(env.queue.jobs) == 1  # not offered again: it is leased
    with env.db.session() as s:
        run = s.get(Run, run_id)
        assert (run.state, run.lease_owner, run.message) == ("preparing", "new-worker", None)


def _pool_with_secret_phase(env: Env) -> tuple[Tenant, int]:
    pool = tenant(env, "a")
    with env.db.session() as s:  # a second phase of the pool's competition, secret
        secret = Phase(competition_id=pool.competition_id, name="dev-2", status="open",
                       runs_per_submission=1, created_at=env.clock.now, **SECRET)
        s.add(secret)
        s.flush()
        secret_id = secret.id
    attached = env.client.put(f"/api/v1/phases/{secret_id}/pool", headers=pool.headers,
                              json={"pool_id": pool.pool_id})
    assert attached.status_code == 200, attached.text
    return pool, secret_id


def take(env: Env, pool: Tenant, worker: str, **extra) -> int | None:
    answer = env.client.post("/internal/pool/jobs", headers={POOL: pool.token},
                             json={"worker": worker} | extra)
    if answer.status_code == 204:
        return None
    assert answer.status_code == 200, answer.text
    return answer.json()["run_id"]


def test_a_pool_worker_without_the_host_lock_is_handed_no_secret_run(env):
    pool, secret_phase = _pool_with_secret_phase(env)
    secret_run = submit(env, secret_phase, "ann")  # the oldest queued run of the pool
    public_run = submit(env, pool.phase_id, "bob")
    assert take(env, pool, "old-worker") == public_run
    assert take(env, pool, "old-worker") is None  # the secret run waits
    assert take(env, pool, "new-worker", host_lock=True) == secret_run
    detail = env.client.get(f"/api/v1/pools/{pool.pool_id}", headers=pool.headers)
    assert detail.status_code == 200, detail.text
    said = {w["name"]: w["host_lock"] for w in detail.json()["workers"]}
    assert said == {"old-worker": False, "new-worker": True}
    login(env, pool.headers)
    page = env.client.get(f"/organizer/pools/{pool.pool_id}").text
    assert page.count(NO_LOCK_TAG) == 1


def test_a_pool_worker_claiming_a_secret_run_without_the_host_lock_leaves_it_offered(env):
    """One that asked with `host_lock` but claims without it: refused, its offer held for the
    pause, then handed to the next worker; never sent to the broker."""
    pool, secret_phase = _pool_with_secret_phase(env)
    secret_run = submit(env, secret_phase, "ann")
    answer = env.client.post("/internal/pool/jobs", headers={POOL: pool.token},
                             json={"worker": "odd-worker", "host_lock": True})
    run_id, token = answer.json()["run_id"], answer.json()["run_token"]
    assert run_id == secret_run
    refused = claim(env, run_id, token, "odd-worker", pool.token)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "worker.no_host_lock"
    assert env.queue.jobs == []
    assert take(env, pool, "new-worker", host_lock=True) is None  # held for the pause
    env.clock.advance(minutes=10)
    assert take(env, pool, "new-worker", host_lock=True) == secret_run
