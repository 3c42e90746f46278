"""The pipeline holds the host lock around a run's execution (issue 34; worker/host_lock.py): a
run the claim marks `exclusive_host` executes only once the host's other holders let go, waits
`preparing` (heartbeating) meanwhile, ends quietly when its lease is lost during the wait, and
its isolation line says it had the host alone. Between real worker processes:
tests/integration/worker/test_host_lock.py and tests/e2e/test_exclusive_host_platform.py."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

from test_worker_evaluate import WAIT_S, FakeExecutor, FakeRunner, PredictingExecutor, make_runtime
from worker_fakes import RUN_TOKEN, make_claimed

from worker.host_lock import HostLock
from worker.pipeline.evaluate import RunResult, evaluate_run


def _runtime(client, executor, tmp_path: Path):  # noqa: ANN001, ANN202
    from dataclasses import replace

    lock = HostLock(tmp_path / "host.lock", slots=2, poll_s=0.01)
    return replace(make_runtime(client, executor, FakeRunner(), tmp_path), host_lock=lock), lock


def _gate_taken(lock: HostLock) -> bool:
    """Whether a waiting exclusive run holds the gate (a shared try on it fails)."""
    with lock.gate.open("a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def test_an_exclusive_run_executes_only_once_the_other_slot_lets_go(fake_client, phase_files,
                                                                    tmp_path):
    fake_client.claimed = make_claimed(phase_files.submission, phase_files.refs,
                                       exclusive_host=True)
    released = threading.Event()

    class Checking(PredictingExecutor):
        def __call__(self, request, cancel):  # noqa: ANN001, ANN204
            assert released.is_set(), "executed while another run held the host"
            return super().__call__(request, cancel)

    runtime, lock = _runtime(fake_client, Checking(), tmp_path)
    other = lock.hold(False)  # an ordinary run of the other slot
    assert other.__enter__() is not None
    results: list[RunResult] = []
    job = threading.Thread(target=lambda: results.append(evaluate_run(7, RUN_TOKEN, runtime)))
    job.start()
    deadline = time.monotonic() + WAIT_S
    while not _gate_taken(lock) and time.monotonic() < deadline:  # it waits at the host
        time.sleep(0.01)
    assert _gate_taken(lock) and job.is_alive()
    beats = len(fake_client.named("heartbeat"))
    while len(fake_client.named("heartbeat")) < beats + 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # it keeps its lease while it waits
    assert set(fake_client.named("heartbeat")) == {"preparing"}
    released.set()
    other.__exit__(None, None, None)
    job.join(WAIT_S)
    assert results == [RunResult.PUBLISHED]
    [body] = fake_client.named("finish")
    assert "exclusive host: no other run on this host" in body["isolation"]


def test_an_ordinary_run_shares_the_host_and_says_so(fake_client, tmp_path):
    runtime, lock = _runtime(fake_client, PredictingExecutor(), tmp_path)
    with lock.hold(False) as other:  # another ordinary run: no wait
        assert other is not None
        assert evaluate_run(7, RUN_TOKEN, runtime) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert "shared host: up to 1 other run(s)" in body["isolation"]


def test_a_lease_lost_while_waiting_ends_the_run_holding_nothing(fake_client, phase_files,
                                                                 tmp_path):
    fake_client.claimed = make_claimed(phase_files.submission, phase_files.refs,
                                       exclusive_host=True)
    executor = FakeExecutor()
    runtime, lock = _runtime(fake_client, executor, tmp_path)
    with lock.hold(False):
        fake_client.revoked = True  # its next beat is answered 409
        assert evaluate_run(7, RUN_TOKEN, runtime) is RunResult.LOST
    assert executor.requests == [] and fake_client.named("finish") == []
    with lock.hold(True) as alone:  # the lost run left nothing held
        assert alone is not None
