"""The host lock (issue 34; worker/host_lock.py) between real processes, as slots are: an
exclusive hold (a secret phase's run) never overlaps another hold, shared holds (ordinary runs)
overlap each other, a waiting exclusive hold is not starved by ordinary runs that keep coming,
and a lost lease ends the wait. That the worker holds it around each run, reset and pre-fault
included, is shown with real worker processes: tests/e2e/test_exclusive_host_platform.py."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

from worker.host_lock import HostLock


def _hold(path: str, exclusive: bool, seconds: float, log: str, label: str) -> None:
    """A slot's run: hold the host for `seconds`, appending its start and end times."""
    with HostLock(Path(path), slots=2, poll_s=0.02).hold(exclusive) as hold:
        assert hold is not None
        began = time.time()
        time.sleep(seconds)
        with open(log, "a") as sink:
            sink.write(f"{label} {began} {time.time()}\n")


def _spans(log: Path) -> dict[str, tuple[float, float]]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return {label: (float(a), float(b)) for label, a, b in rows}


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _start(path: Path, exclusive: bool, seconds: float, log: Path,
           label: str) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("fork").Process(
        target=_hold, args=(str(path), exclusive, seconds, str(log), label))
    process.start()
    return process


def test_an_exclusive_hold_overlaps_no_other_while_shared_ones_overlap(tmp_path: Path):
    lock, log = tmp_path / "host.lock", tmp_path / "spans"
    processes = [_start(lock, False, 0.6, log, "ordinary-1"),
                 _start(lock, False, 0.6, log, "ordinary-2")]
    time.sleep(0.2)  # both ordinary runs hold it: the secret one arrives while they run
    processes.append(_start(lock, True, 0.4, log, "secret"))
    time.sleep(0.1)
    processes.append(_start(lock, False, 0.3, log, "ordinary-3"))  # arrives after the secret
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    spans = _spans(log)
    assert _overlap(spans["ordinary-1"], spans["ordinary-2"])
    for label in ("ordinary-1", "ordinary-2", "ordinary-3"):
        assert not _overlap(spans["secret"], spans[label]), spans
    # The gate: the ordinary run that came after the waiting secret one ran after it.
    assert spans["ordinary-3"][0] >= spans["secret"][1]


def test_a_waiting_exclusive_hold_is_not_starved_by_a_stream_of_shared_ones(tmp_path: Path):
    lock, log = tmp_path / "host.lock", tmp_path / "spans"
    stop = time.monotonic() + 3.0
    ctx = multiprocessing.get_context("fork")

    def stream(slot: int) -> None:  # one slot taking ordinary runs back to back
        n = 0
        while time.monotonic() < stop:
            _hold(str(lock), False, 0.15, str(log), f"ordinary-{slot}-{n}")
            n += 1

    slots = [ctx.Process(target=stream, args=(slot,)) for slot in range(2)]
    for process in slots:
        process.start()
    time.sleep(0.3)
    secret = _start(lock, True, 0.2, log, "secret")
    secret.join(30)
    assert secret.exitcode == 0
    waited_until = time.monotonic()
    for process in slots:
        process.join(30)
    spans = _spans(log)
    assert waited_until < stop, "the secret run waited until the ordinary runs stopped"
    assert not any(_overlap(spans["secret"], span) for label, span in spans.items()
                   if label != "secret")


def test_a_lost_lease_ends_the_wait_holding_nothing(tmp_path: Path):
    lock = HostLock(tmp_path / "host.lock", slots=2, poll_s=0.02)
    cancel = threading.Event()
    with lock.hold(False) as ordinary:
        assert ordinary is not None
        threading.Timer(0.2, cancel.set).start()
        with lock.hold(True, cancel) as secret:
            assert secret is None
    with lock.hold(True) as secret:  # nothing was left held
        assert secret is not None and secret.exclusive
        assert secret.line.startswith("exclusive host")
