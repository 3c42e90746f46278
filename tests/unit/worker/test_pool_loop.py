"""A pool worker's loop (issue 37, worker/pool_loop.py) with a fake job source: it evaluates
each job, paces its requests when idle, backs off when the server is unreachable, and stops with
exit 3 when its credential is revoked. The HTTP side and the process are tested in
tests/integration/worker/test_pool_worker.py; the real server's side in
tests/e2e/test_pools_across_hosts.py."""

from __future__ import annotations

from worker.client import PoolJob, PoolRevokedError
from worker.client import ServerUnavailableError as Unreachable
from worker.pool_loop import EXIT_REVOKED, PoolLoop


class FakeSource:
    def __init__(self, answers: list) -> None:  # PoolJob | None | an exception to raise
        self.answers, self.calls, self.pool_revoked = answers, 0, False

    def request_job(self, worker: str, host: str, gpus: list[str], images: list[str]):
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer


class CountingStop:
    """Stops the loop after `limit` waits; records how long each wait was asked to be."""

    def __init__(self, limit: int) -> None:
        self.waits: list[float | None] = []
        self.limit = limit

    def is_set(self) -> bool:
        return len(self.waits) >= self.limit

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self.is_set()


def loop_with(source: FakeSource, stop: CountingStop, evaluated: list, **fields) -> PoolLoop:
    values = {"evaluate": lambda rid, tok: evaluated.append((rid, tok)), "max_backoff_s": 10.0,
              **fields}
    return PoolLoop(client=source, worker="w/0@x", host="h", gpus=[], list_images=lambda: None,
                    poll_s=2.0, stopping=stop, **values)


def test_the_loop_evaluates_each_job_polls_when_idle_and_backs_off_when_unreachable():
    source = FakeSource([None, PoolJob(run_id=3, run_token="a"), Unreachable("x"),
                         Unreachable("x"), Unreachable("x"), Unreachable("x"), None])
    stop, evaluated = CountingStop(limit=6), []
    assert loop_with(source, stop, evaluated).run() == 0
    assert evaluated == [(3, "a")]
    # idle: the poll interval; unreachable: doubling to the cap, then the poll interval again.
    assert stop.waits == [2.0, 2.0, 4.0, 8.0, 10.0, 2.0]


def test_the_loop_stops_with_exit_3_when_revoked_before_or_during_a_run():
    stop = CountingStop(limit=100)
    assert loop_with(FakeSource([PoolRevokedError("401")]), stop, []).run() == EXIT_REVOKED
    source = FakeSource([PoolJob(run_id=4, run_token="b")])

    def evaluate_and_meet_revocation(rid: int, tok: str) -> None:
        source.pool_revoked = True  # a heartbeat of the run was answered 401 pool.revoked

    loop = loop_with(source, stop, [], evaluate=evaluate_and_meet_revocation)
    assert loop.run() == EXIT_REVOKED and source.calls == 1


def _stop_on_term_with_stop_current_run():
    import multiprocessing
    import signal

    from worker.pool_loop import _StopOnTerm
    from worker.shutdown import stop_current_run

    previous = signal.signal(signal.SIGTERM, stop_current_run)
    return _StopOnTerm(multiprocessing.get_context("fork").Event()), previous


def test_sigterm_in_an_idle_slot_only_marks_it_and_its_wait_returns():
    """An idle slot's SIGTERM must not raise: raised inside the shared Event's wait or is_set,
    it can leave the Event's cross-process lock held by the dying slot, and the parent's next
    is_set() then blocks for ever (a pool worker that never exited after SIGTERM)."""
    import os
    import signal
    import time

    stop, previous = _stop_on_term_with_stop_current_run()
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # idle: handled at the next bytecode, no raise
        started = time.monotonic()
        assert stop.wait(30) is True
        assert time.monotonic() - started < 5
        assert stop.is_set()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_while_a_run_is_evaluated_raises_in_it_and_a_stopped_slot_claims_nothing():
    import os
    import signal

    import pytest

    from worker.shutdown import WorkerStopped

    stop, previous = _stop_on_term_with_stop_current_run()
    try:
        with pytest.raises(WorkerStopped), stop.evaluating():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
        assert stop.is_set()
        with pytest.raises(WorkerStopped, match="before this run was claimed"), \
                stop.evaluating():
            raise AssertionError("a stopped slot must not start a run")
    finally:
        signal.signal(signal.SIGTERM, previous)
