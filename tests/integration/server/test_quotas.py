"""Quotas: per day, total and in flight; atomic under simultaneous uploads; platform failures
never charged."""

from __future__ import annotations

import threading

from _server_support import zip_bytes
from sqlalchemy import func, select

from server.core.errors import QuotaExceededError
from server.models import Submission
from server.services.storage import Storage
from server.services.upload import StagedUpload, accept_submission
from submission_api.submission_zip import ZipLimits


def test_total_quota_refuses_the_next_upload_with_a_clear_code(env):
    phase = env.phase(quota_total=2)
    _, headers = env.user("ann")
    assert [env.submit(phase.id, headers).status_code for _ in range(2)] == [201, 201]
    third = env.submit(phase.id, headers)
    assert third.status_code == 429
    error = third.json()["error"]
    assert error["code"] == "quota.total"
    assert "2 of 2" in error["message"]


def test_per_day_quota_resets_on_the_next_utc_day(env):
    phase = env.phase(quota_per_day=1)
    _, headers = env.user("ann")
    assert env.submit(phase.id, headers).status_code == 201
    assert env.submit(phase.id, headers).json()["error"]["code"] == "quota.per_day"
    env.clock.advance(days=1)
    assert env.submit(phase.id, headers).status_code == 201


def test_quota_is_per_participant(env):
    phase = env.phase(quota_total=1)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    assert env.submit(phase.id, ann).status_code == 201
    assert env.submit(phase.id, bob).status_code == 201


def test_in_flight_quota_frees_a_slot_when_a_submission_ends(env):
    phase = env.phase(quota_in_flight=1)
    _, headers = env.user("ann")
    assert env.submit(phase.id, headers).status_code == 201
    assert env.submit(phase.id, headers).json()["error"]["code"] == "quota.in_flight"
    run_id, token, _ = env.queue.jobs[0]
    auth = {"Authorization": f"Bearer {token}"}
    fencing = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                              headers=auth).json()["fencing_token"]
    env.client.post(f"/internal/runs/{run_id}/finish", headers=auth, json={
        "fencing_token": fencing, "state": "failed", "reason": "import_error"})
    assert env.submit(phase.id, headers).status_code == 201


def test_platform_failed_submission_is_not_charged(env):
    phase = env.phase(quota_total=1)
    _, headers = env.user("ann")
    assert env.submit(phase.id, headers).status_code == 201
    run_id, token, _ = env.queue.jobs[0]
    for _ in range(env.settings.max_platform_failures):
        auth = {"Authorization": f"Bearer {token}"}
        fencing = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                                  headers=auth).json()["fencing_token"]
        env.client.post(f"/internal/runs/{run_id}/release", headers=auth,
                        json={"fencing_token": fencing, "error": "gpu fell off the bus"})
        token = env.queue.jobs[-1][1]
    assert env.submit(phase.id, headers).status_code == 201


def test_two_simultaneous_uploads_cannot_both_take_the_last_slot(env, tmp_path):
    """Threads released by a barrier race for one remaining slot: exactly one wins."""
    phase = env.phase(quota_total=1)
    user, _ = env.user("ann")
    storage = Storage(env.settings.storage)
    contenders = 4
    barrier = threading.Barrier(contenders)
    outcomes: list[str] = []

    def upload(i: int) -> None:
        path = storage.tmp_path()
        data = zip_bytes([("model.py", f"# {i}\n".encode())])
        path.write_bytes(data)
        staged = StagedUpload(path=path, sha256=f"{i:064x}", size=len(data))
        barrier.wait()
        try:
            accept_submission(env.db, storage, env.queue, user_id=user.id, phase_id=phase.id,
                              staged=staged, now=env.clock.now, limits=ZipLimits(),
                              default_queue="arena")
            outcomes.append("accepted")
        except QuotaExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["accepted"] + ["refused"] * (contenders - 1)
    with env.db.session() as s:
        assert s.execute(select(func.count(Submission.id))).scalar_one() == 1
    assert len(list((env.settings.storage / "submissions").iterdir())) == 1
