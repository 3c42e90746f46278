"""Pure pieces of the server: submission state derivation, log capping, the error table,
the streaming size cap."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from server.core.errors import (
    QuotaExceededError,
    StaleLeaseError,
    UploadTooLargeError,
    describe_error,
)
from server.services.runs import LeasePolicy, cap_log
from server.services.storage import StreamingFile
from server.services.submissions import derive_state
from submission_api.submission_zip import UnsafeZipError


def run(state, score=None, reason=None, index=0, message=None):
    return SimpleNamespace(state=state, score=score, reason=reason, index=index, message=message)


@pytest.mark.parametrize(("runs", "expected"), [
    ([run("queued"), run("queued")], ("queued", None, None)),
    ([run("finished", 0.5), run("queued")], ("running", None, None)),
    ([run("finished", 0.5), run("finished", 0.3)], ("finished", None, 0.3)),
    ([run("failed", reason="platform_error", index=0), run("failed", reason="fit_error", index=1)],
     ("failed", "fit_error", None)),
    ([run("finished", 0.5), run("timed_out", index=1)], ("timed_out", None, None)),
])
def test_submission_state_follows_its_runs(runs, expected):
    state, reason, _message, score = derive_state(runs)
    assert (state, reason, score) == expected


def test_long_logs_keep_their_head_and_tail():
    capped = cap_log("TOP" + "a" * 100 + "END", LeasePolicy(log_cap_bytes=10))
    assert capped.startswith("TOPaa") and capped.endswith("aaEND")
    assert "96 bytes cut here" in capped


@pytest.mark.parametrize(("exc", "status", "code"), [
    (UnsafeZipError("zip.bomb", "m"), 422, "zip.bomb"),
    (QuotaExceededError("m", code="quota.total"), 429, "quota.total"),
    (StaleLeaseError("m"), 409, "run.stale_lease"),
    (RuntimeError("secret detail"), 500, "internal"),
])
def test_error_table_maps_each_exception_to_one_status_and_code(exc, status, code):
    got_status, body = describe_error(exc)
    assert (got_status, body["error"]["code"]) == (status, code)
    assert "secret detail" not in body["error"]["message"]


def test_streaming_file_enforces_the_cap_and_leaves_nothing(tmp_path):
    stream = StreamingFile(tmp_path / "x.part", max_bytes=10)
    stream.write(b"12345")
    with pytest.raises(UploadTooLargeError):
        stream.write(b"678901")
    assert not (tmp_path / "x.part").exists()


def test_the_database_pool_is_sized_from_the_requests_admitted_at_once():
    """Two connections per admitted request (a read and a write session) plus headroom, so
    the pool cannot run dry (issue 21); sizes given explicitly win."""
    from server.core.config import POOL_HEADROOM, Settings

    pool = Settings(request_concurrency=32).db_pool()
    assert pool.size + pool.max_overflow == 2 * (32 + 4) + POOL_HEADROOM  # + the workers' lane
    explicit = Settings(db_pool_size=5, db_max_overflow=1).db_pool()
    assert (explicit.size, explicit.max_overflow) == (5, 1)
