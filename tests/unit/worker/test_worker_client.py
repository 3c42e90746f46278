"""The internal-API client against a tiny local HTTP server: retries, 409s, refusals, downloads."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from worker.client import InternalClient, ServerRejectedError, ServerUnavailableError

CLAIM = {
    "run_id": 5, "fencing_token": 9, "lease_expires_at": "2030-01-01T00:00:00Z",
    "submission_sha256": "a" * 64, "protocol": {"name": "fixed", "n_ways": 5},
    "test_seed": 1, "participant_seed": 2, "time_limit_s": 600,
    "resources": {"cpus": 4, "memory_mb": 8000, "gpus": 1}, "image": "arena/sandbox:gpu",
    "datasets": [{"name": "a", "content_hash": "b" * 64, "split": "meta-train"}],
    "some_future_field": True,
}


class Script:
    """Answers per path, consumed in order; the last answer repeats. Records what it saw."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, bytes]]] = {}
        self.seen: list[tuple[str, str, str | None, bytes]] = []


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
            queue = script.answers.get(self.path) or [(404, b"no route")]
            status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()
    httpd.server_close()


def make_client(url: str, sleeps: list[float] | None = None, attempts: int = 3) -> InternalClient:
    recorder = sleeps if sleeps is not None else []
    return InternalClient(url, timeout_s=5, attempts=attempts, backoff_s=0.5,
                          sleep=recorder.append)


def test_claim_parses_the_claimed_run_and_sends_the_bearer_token(server):
    url, script = server
    script.answers["/internal/runs/5/claim"] = [(200, json.dumps(CLAIM).encode())]
    claimed = make_client(url).claim(5, "tok", "host/0")
    assert claimed is not None
    assert (claimed.fencing_token, claimed.resources.gpus, claimed.datasets[0].splits) == (
        9, 1, ("meta-train",))
    method, _, auth, body = script.seen[0]
    assert (method, auth, json.loads(body)) == ("POST", "Bearer tok", {"worker": "host/0"})


def test_claim_answered_409_returns_none(server):
    url, script = server
    script.answers["/internal/runs/5/claim"] = [(409, b"finished")]
    assert make_client(url).claim(5, "tok", "w") is None


def test_5xx_is_retried_with_doubling_backoff_until_success(server):
    url, script = server
    script.answers["/internal/runs/5/heartbeat"] = [(503, b""), (500, b""), (200, b"{}")]
    sleeps: list[float] = []
    assert make_client(url, sleeps).heartbeat(5, "tok", 9, "running") is True
    assert sleeps == [0.5, 1.0]
    assert len(script.seen) == 3


def test_5xx_every_time_raises_server_unavailable_after_the_last_attempt(server):
    url, script = server
    script.answers["/internal/runs/5/finish"] = [(502, b"bad gateway")]
    with pytest.raises(ServerUnavailableError, match="failed 3 times.*502"):
        make_client(url).finish(5, "tok", {"fencing_token": 9})
    assert len(script.seen) == 3


def test_other_4xx_is_not_retried_and_raises_rejected(server):
    url, script = server
    script.answers["/internal/runs/5/release"] = [(403, b"forbidden")]
    with pytest.raises(ServerRejectedError, match="403"):
        make_client(url).release(5, "tok", 9, "disk full")
    assert len(script.seen) == 1


def test_a_rotated_run_token_reads_as_not_ours(server):
    # The server rotates a run's token when it re-enqueues it; the old job must drop quietly.
    url, script = server
    script.answers["/internal/runs/5/claim"] = [(401, b"unknown token")]
    assert make_client(url).claim(5, "old-token", "w1") is None
    assert len(script.seen) == 1


def test_stale_fencing_token_on_heartbeat_and_finish_returns_false(server):
    url, script = server
    script.answers["/internal/runs/5/heartbeat"] = [(409, b"stale")]
    script.answers["/internal/runs/5/finish"] = [(409, b"stale")]
    client = make_client(url)
    assert client.heartbeat(5, "tok", 9, "running") is False
    assert client.finish(5, "tok", {"fencing_token": 9}) is False


def test_connection_refused_is_retried_then_raises():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    with pytest.raises(ServerUnavailableError, match="ConnectError"):
        make_client(f"http://127.0.0.1:{port}", sleeps).claim(1, "tok", "w")
    assert sleeps == [0.5, 1.0]


def test_download_streams_to_the_file_and_retries_a_failed_attempt(server, tmp_path: Path):
    url, script = server
    payload = bytes(range(256)) * 5000
    script.answers["/internal/datasets/" + "c" * 64] = [(500, b"oops"), (200, payload)]
    dest = tmp_path / "d.tar"
    make_client(url).download_dataset("c" * 64, "tok", dest)
    assert dest.read_bytes() == payload


def test_download_answered_404_raises_rejected_and_writes_nothing(server, tmp_path: Path):
    url, _ = server
    dest = tmp_path / "s.zip"
    with pytest.raises(ServerRejectedError, match="404"):
        make_client(url).download_submission(5, "tok", dest)
    assert not dest.exists()


def server_claim(**changes: object) -> dict:
    """A claim exactly as the server's schema serializes it (a contract test of the wire)."""
    from server.schemas.internal import ClaimedRun as ServerClaimedRun

    values = {
        "run_id": 5, "submission_id": 2, "fencing_token": 9,
        "lease_expires_at": "2030-01-01T00:00:00Z", "submission_sha256": "a" * 64,
        "submission_size": 100, "submission_root": "", "phase_id": 1,
        "protocol": {"name": "within-domain"}, "test_seed": 1, "participant_seed": 2,
        "run_index": 0,
        "time_limit_s": 600, "resources": {"cpus": 2, "memory_mb": 4096, "gpus": 0},
        "image": None, "dataset_hashes": ["b" * 64, "c" * 64],
        "data": {"collection": "mini", "meta_train": [{"name": "x", "content_hash": "b" * 64}],
                 "meta_valid": [],
                 "meta_test": [{"name": "x", "content_hash": "b" * 64},
                               {"name": "y", "content_hash": "c" * 64}]},
        **changes,
    }
    return json.loads(ServerClaimedRun.model_validate(values).model_dump_json())


def test_claim_in_the_servers_shape_folds_roles_into_one_dataset_list(server):
    url, script = server
    script.answers["/internal/runs/5/claim"] = [(200, json.dumps(server_claim()).encode())]
    claimed = make_client(url).claim(5, "tok", "w")
    assert claimed.collection == "mini" and claimed.image is None
    assert [(d.name, d.splits) for d in claimed.datasets] == [
        ("x", ("meta-train", "meta-test")), ("y", ("meta-test",))]


def test_claim_naming_one_dataset_with_two_hashes_is_refused():
    from pydantic import ValidationError

    from worker.client import ClaimedRun

    data = server_claim()
    data["data"]["meta_test"][0]["content_hash"] = "d" * 64
    with pytest.raises(ValidationError, match="two content hashes"):
        ClaimedRun.model_validate(data)


def test_the_real_workers_claim_and_job_request_say_it_holds_its_host_alone(server, tmp_path):
    """The worker's runtime (`wiring.build_runtime`) holds the host lock around every run, so
    its claims and pool job requests say `host_lock`: the server gives a secret phase's run only
    to such a worker (an older one ignores `exclusive_host`). A client built without it (as
    above) sends no such field, as an older worker does."""
    from worker.pipeline.wiring import build_runtime
    from worker.settings import WorkerSettings

    url, script = server
    script.answers["/internal/runs/5/claim"] = [(200, json.dumps(CLAIM).encode())]
    script.answers["/internal/pool/jobs"] = [(204, b"")]
    runtime = build_runtime(WorkerSettings(name="gpu-host", executor="local", data_dir=tmp_path,
                                           server_url=url, http_attempts=1), slot=0)
    assert runtime.host_lock is not None
    assert runtime.client.claim(5, "tok", "gpu-host/0") is not None
    assert runtime.client.request_job("gpu-host/0", "gpu-host", [], []) is None
    claim_body, job_body = (json.loads(seen[3]) for seen in script.seen)
    assert claim_body["host_lock"] is True and job_body["host_lock"] is True
