"""The running stage's output streamed with the heartbeat (issue 24, trap 10): the executors tee
what the participant side writes into a bounded `LiveTail`, each running beat carries its text
as `progress.log_tail`, within the contract's cap and storable."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from test_worker_client import make_client
from test_worker_client import server as server  # noqa: F401 - the local HTTP server fixture
from test_worker_evaluate import WAIT_S, PredictingExecutor, run
from test_worker_local_executor import make_request

from submission_api.contract.caps import LOG_TAIL_CAP
from worker.live_tail import LiveTail
from worker.local_executor import run_command
from worker.pipeline.execute import ExecutionRequest, ExecutionResult
from worker.sandbox_streams import LogPump


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S  # a bound for a thread to act, not a timing assertion
    while not condition():
        assert time.monotonic() < deadline, f"expected {what} within {WAIT_S} s"
        time.sleep(0.01)


class TailingExecutor(PredictingExecutor):
    """Writes a line the way a pump does, then waits for a heartbeat to carry it."""

    def __init__(self, client) -> None:
        super().__init__()
        self.client = client

    def __call__(self, request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        assert request.live_tail is not None
        request.live_tail.append(b"epoch 1 loss 0.93\n\x00")
        _wait_for(lambda: any(p and p.get("log_tail") for p in self.client.progress),
                  "a running heartbeat carrying the log tail")
        return super().__call__(request, cancel)


def test_a_running_heartbeat_carries_the_output_tail(fake_client, tmp_path):
    run(fake_client, tmp_path, TailingExecutor(fake_client))
    tails = [p["log_tail"] for p in fake_client.progress if p and p.get("log_tail")]
    assert tails[0] == "epoch 1 loss 0.93\n\ufffd"  # NUL made storable
    stages = [stage for name, stage in fake_client.calls if name == "heartbeat"]
    # Only running beats carry progress (preparing and scoring ones none).
    assert all(progress is None for stage, progress in zip(stages, fake_client.progress,
                                                           strict=True) if stage != "running")


def test_the_heartbeat_body_sends_the_tail(server):  # noqa: F811 - the imported fixture
    url, script = server
    script.answers["/internal/runs/5/heartbeat"] = [(200, b"{}")]
    tail = "loss 0.5\n\ud800"
    assert make_client(url).heartbeat(5, "tok", 9, "running", {"step": "meta_fit",
                                                               "log_tail": tail})
    body = json.loads(script.seen[0][3])
    assert body["progress"] == {"step": "meta_fit", "log_tail": "loss 0.5\n\ufffd"}


def test_the_tail_is_bounded_by_the_contract_and_starts_at_a_whole_line():
    tail = LiveTail()
    for i in range(2000):
        tail.append(f"line {i} é\n".encode())
    text = tail.text()
    assert text is not None and len(text) <= LOG_TAIL_CAP
    assert text.startswith("line ") and text.endswith("line 1999 é\n")
    assert LiveTail().text() is None


def test_the_docker_pump_tees_both_streams_in_arrival_order():
    tail = LiveTail()
    pump = LogPump(iter([(b"out 1\n", None), (None, b"err 1\n"), (b"out 2\n", None)]), 1024,
                   tail)
    pump.start()
    assert pump.join(WAIT_S)
    assert tail.text() == "out 1\nerr 1\nout 2\n"
    assert pump.stdout.text() == "out 1\nout 2\n"  # the full log is kept as before


def test_the_local_executor_streams_output_while_the_process_runs(tmp_path: Path):
    """The line is seen while the process still runs (a pipe read waiting for 64 KiB or the
    end would show it only when the run is over)."""
    tail, cancel = LiveTail(), threading.Event()
    request = replace(make_request(tmp_path), live_tail=tail)
    code = ("import sys, time; print('epoch 1', flush=True); "
            "print('warn', file=sys.stderr, flush=True); time.sleep(60)")
    results: list[ExecutionResult] = []
    runner = threading.Thread(target=lambda: results.append(
        run_command([sys.executable, "-c", code], request, cancel)))
    runner.start()
    try:
        _wait_for(lambda: "epoch 1" in (tail.text() or "") and "warn" in (tail.text() or ""),
                  "the running process's output in the live tail")
        assert not results  # still running
    finally:
        cancel.set()
        runner.join(WAIT_S)
    assert results and results[0].stdout == "epoch 1\n"
