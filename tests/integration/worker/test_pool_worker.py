"""A pool worker (issue 37) against a stub of the contract's internal API: the pool header on
every call, the job request's answers, and how the worker process stops (revoked: exit 3 with
the reason; SIGTERM while idle: exit 0). The loop's pacing: tests/unit/worker/test_pool_loop.py;
against the real server: tests/e2e/test_pools_across_hosts.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from worker.client import POOL_HEADER, InternalClient, PoolJob, PoolRevokedError
from worker.pool_loop import EXIT_REVOKED

TOKEN = "arena_pool_" + "x" * 43
REVOKED = json.dumps({"error": {"code": "pool.revoked", "message": "revoked",
                                "family": "participant"}}).encode()


class Stub:
    """Answers per path in order (the last repeats); records method, path, headers, body."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, bytes]]] = {}
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []


@pytest.fixture
def stub() -> Iterator[tuple[str, Stub]]:
    script = Stub()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.seen.append((self.command, self.path, dict(self.headers), body))
            queue = script.answers.get(self.path) or [(404, b"{}")]
            status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
            self.send_response(status)
            if status != 204:
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if status != 204:
                self.wfile.write(payload)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_job_request_carries_the_pool_header_and_the_workers_description(stub):
    url, script = stub
    script.answers["/internal/pool/jobs"] = [(204, b""), (200, b'{"run_id": 7, "run_token": "t"}')]
    client = InternalClient(url, pool_token=TOKEN, attempts=1)
    assert client.request_job("w/0@h", "host-a", ["0"], ["img:1"]) is None
    assert client.request_job("w/0@h", "host-a", ["0"], ["img:1"]) == PoolJob(run_id=7,
                                                                               run_token="t")
    method, path, headers, body = script.seen[0]
    assert (method, path, headers[POOL_HEADER]) == ("POST", "/internal/pool/jobs", TOKEN)
    assert "Authorization" not in headers  # no run yet: the pool credential alone
    assert json.loads(body) == {"worker": "w/0@h", "host": "host-a", "gpus": ["0"],
                                "images": ["img:1"]}


def test_every_run_call_of_a_pool_worker_carries_both_tokens(stub, tmp_path):
    url, script = stub
    script.answers["/internal/runs/7/heartbeat"] = [(200, b"{}")]
    script.answers["/internal/runs/7/submission"] = [(200, b"zip")]
    client = InternalClient(url, pool_token=TOKEN, attempts=1)
    assert client.heartbeat(7, "run-token", 1, "running")
    client.download_submission(7, "run-token", tmp_path / "s.zip")
    for _method, _path, headers, _body in script.seen:
        assert headers[POOL_HEADER] == TOKEN and headers["Authorization"] == "Bearer run-token"
    # A shared (Celery) worker sends no pool header at all.
    InternalClient(url, attempts=1).heartbeat(7, "run-token", 1, "running")
    assert POOL_HEADER not in script.seen[-1][2]


def test_a_revoked_credential_stops_the_job_request_and_is_noted_on_run_calls(stub, tmp_path):
    url, script = stub
    script.answers["/internal/pool/jobs"] = [(401, REVOKED)]
    script.answers["/internal/runs/7/heartbeat"] = [(401, REVOKED)]
    script.answers["/internal/runs/8/heartbeat"] = [(401, b'{"error": {"code": "auth"}}')]
    client = InternalClient(url, pool_token=TOKEN, attempts=1)
    with pytest.raises(PoolRevokedError):
        client.request_job("w", "h", [], [])
    other = InternalClient(url, pool_token=TOKEN, attempts=1)
    assert other.heartbeat(8, "t", 1, "running") is False and not other.pool_revoked  # rotated
    assert other.heartbeat(7, "t", 1, "running") is False and other.pool_revoked


def start_pool_worker(url: str, tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "ARENA_WORKER_SERVER_URL": url, "ARENA_WORKER_EXECUTOR": "local",
           "ARENA_WORKER_DATA_DIR": str(tmp_path / "data"), "ARENA_WORKER_POOL_POLL_S": "0.2",
           "ARENA_WORKER_CONCURRENCY": "2", "ARENA_WORKER_NAME": "organizer-gpu",
           "ARENA_WORKER_BROKER_URL": "redis://192.0.2.1:1/0"}  # never used: no broker
    env.pop("ARENA_WORKER_POOL_TOKEN", None)
    return subprocess.Popen([sys.executable, "-m", "worker", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def wait_for_requests(script: Stub, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while len(script.seen) < count:
        assert time.monotonic() < deadline, f"{len(script.seen)} requests, expected {count}"
        time.sleep(0.1)


def test_a_revoked_worker_process_exits_3_and_says_what_to_do(stub, tmp_path):
    url, script = stub
    script.answers["/internal/pool/jobs"] = [(204, b""), (204, b""), (204, b""), (401, REVOKED)]
    worker = start_pool_worker(url, tmp_path, "--pool-token", TOKEN)
    output, _ = worker.communicate(timeout=60)
    assert worker.returncode == EXIT_REVOKED, output[-2000:]
    assert "revoked" in output and "arena pool token" in output
    assert "broker='none: a pool worker" in output and "192.0.2.1" not in output
    assert {headers[POOL_HEADER] for _m, _p, headers, _b in script.seen} == {TOKEN}
    # Both slots asked, each under its own name, from this host.
    names = {json.loads(body)["worker"].split("@")[0] for _m, _p, _h, body in script.seen}
    assert names == {"organizer-gpu/0", "organizer-gpu/1"}


def test_sigterm_stops_an_idle_pool_worker_cleanly(stub, tmp_path):
    url, script = stub
    script.answers["/internal/pool/jobs"] = [(204, b"")]
    worker = start_pool_worker(url, tmp_path, "--pool-token", TOKEN)
    try:
        wait_for_requests(script, 4)
        os.kill(worker.pid, signal.SIGTERM)
        output, _ = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    assert worker.returncode == 0, output[-2000:]
    assert "worker.pool.stopped" in output
