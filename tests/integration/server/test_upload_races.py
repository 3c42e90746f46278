"""Uploads of the same bytes at once, and the order of an upload's checks (issue 21).

D7: on 08e9140 a refused upload deleted the stored zip of a concurrent accepted upload with
the same bytes (its clean-up saw only committed rows): 17 of 60 trials, and the accepted
submission then failed after 15 x 500 on fetch. And every upload decompressed its whole zip
before the cheap checks (quota, phase open), so a refused one cost seconds of server CPU.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from _server_support import zip_bytes

from server.core.errors import QuotaExceededError
from server.services import upload as upload_service
from server.services.upload import StagedUpload, accept_submission
from submission_api.submission_zip import ZipLimits

TRIALS = 30


def stage(env, data: bytes) -> StagedUpload:
    import hashlib

    storage = env.client.app.state.storage
    path = storage.tmp_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return StagedUpload(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


def accept(env, user_id: int, phase_id: int, data: bytes):
    app = env.client.app
    return accept_submission(app.state.db, app.state.storage, env.queue, user_id=user_id,
                             phase_id=phase_id, staged=stage(env, data), now=env.clock.now,
                             limits=ZipLimits(), default_queue="arena")


def test_a_refused_upload_never_deletes_the_zip_of_an_accepted_one_with_the_same_bytes(env):
    phase = env.phase(quota_total=1)
    storage = env.client.app.state.storage
    lost = 0
    for trial in range(TRIALS):
        accepted, _ = env.user(f"acc{trial}")
        refused, _ = env.user(f"ref{trial}")
        accept(env, refused.id, phase.id, zip_bytes([("model.py", b"x = 1\n"),
                                                    ("n.txt", uuid.uuid4().bytes)]))
        same = zip_bytes([("model.py", b"x = 2\n"), ("n.txt", uuid.uuid4().bytes)])
        barrier = threading.Barrier(2)

        def go(user_id: int, data: bytes = same, barrier: threading.Barrier = barrier):
            barrier.wait()
            try:
                return accept(env, user_id, phase.id, data)
            except QuotaExceededError:
                return None

        with ThreadPoolExecutor(2) as pool:
            ok, no = pool.submit(go, accepted.id), pool.submit(go, refused.id)
            submission, refusal = ok.result(), no.result()
        assert submission is not None and refusal is None
        if not storage.absolute(submission.storage_path).is_file():
            lost += 1
    assert lost == 0, f"{lost} of {TRIALS} accepted submissions lost their stored zip"


def test_cheap_checks_refuse_before_the_zip_is_decompressed(env, monkeypatch):
    phase = env.phase(status="closed")
    user, _ = env.user("ann")
    checked = []
    real = upload_service.check_submission_zip
    monkeypatch.setattr(upload_service, "check_submission_zip",
                        lambda *a, **k: checked.append(1) or real(*a, **k))
    from server.core.errors import PhaseClosedError
    with pytest.raises(PhaseClosedError):
        accept(env, user.id, phase.id, zip_bytes())
    assert checked == []
