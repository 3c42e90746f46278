"""Requests that cost the server or answered 500 (issue 21): a multipart body cut before its
closing boundary (was accepted), a league a competition does not have (was ignored), a 100 MB
request header (was accepted, +97 MB per request), a database that is down (was a plain-text
500). Each now gets a stable code; the header bound is checked on a real uvicorn server.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
import uvicorn
from fastapi.testclient import TestClient
from inprocess_support import zip_bytes

from server.app import create_app
from server.core.config import Settings
from server.core.http_bounds import header_part, uvicorn_bounds
from server.models import Submission


def test_a_multipart_body_without_its_closing_boundary_is_refused(app_env):
    org = app_env.token_for("ola", role="organizer")
    phase_id = app_env.competition(org)["phases"][0]["id"]
    user = app_env.token_for("pia")
    data = zip_bytes()
    body = (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s.zip\"\r\n"
            b"Content-Type: application/zip\r\n\r\n" + data + b"\r\n")  # no --B--
    answer = app_env.client.post(f"/api/v1/phases/{phase_id}/submissions", content=body,
                                 headers={**user, "Content-Type": "multipart/form-data; "
                                          "boundary=B"})
    assert answer.status_code == 422, answer.text
    assert "closing boundary" in answer.json()["error"]["message"]
    with app_env.db.session() as session:
        assert session.query(Submission).filter_by(phase_id=phase_id).count() == 0


def test_a_league_the_competition_does_not_have_is_refused(app_env):
    org = app_env.token_for("olb", role="organizer")
    phase_id = app_env.competition(org)["phases"][0]["id"]
    user = app_env.token_for("pib")
    answer = app_env.client.post(f"/api/v1/phases/{phase_id}/submissions", headers=user,
                                 files={"file": ("s.zip", zip_bytes(), "application/zip")},
                                 data={"league": "pro"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "submission.unknown_league"


def test_a_database_outage_answers_503_with_retry_after_and_json(tmp_path):
    settings = Settings(data_dir=tmp_path, auto_migrate=False, reconcile_interval_s=0,
                        database_url="postgresql+psycopg://arena@127.0.0.1:1/arena")
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    answer = client.get("/api/v1/phases")
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["Retry-After"]) > 0
    assert answer.json()["error"]["code"] == "database.unavailable"


@pytest.fixture
def bounded_server():
    async def app(scope, receive, send):
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", **uvicorn_bounds(16 * 1024)))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):  # up to ~10 s to listen
        if server.started:
            break
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def send_raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        with contextlib.suppress(OSError):  # it may close before it has read everything
            conn.sendall(request)
        return conn.recv(200)


@pytest.mark.parametrize("size", [200_000, 5_000_000])
def test_a_request_header_over_the_bound_is_answered_431(bounded_server, size):
    answer = send_raw(bounded_server, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size
                      + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431")


def test_ordinary_and_keep_alive_requests_pass_the_header_bound(bounded_server):
    with socket.create_connection(("127.0.0.1", bounded_server), timeout=10) as conn:
        for _ in range(400):  # 400 x 60 bytes: more than the bound over one connection
            conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Small: " + b"a" * 30 + b"\r\n\r\n")
            answer = conn.recv(200)
            while not answer.endswith(b"0\r\n\r\n"):  # the head and the chunks may come
                more = conn.recv(200)  # in reads of their own (asyncio's loop writes each)
                assert more, answer
                answer += more
            assert answer.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("body_size", [100_000, 1_000_000])
def test_a_large_body_sent_with_its_headers_in_one_write_is_not_counted_as_headers(
        bounded_server, body_size):
    """Issue 32: body bytes that arrived in the same read as the headers counted as headers, and
    every upload whose first read passed the bound got 431."""
    body = b"b" * body_size
    request = (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               b"Content-Length: %d\r\n\r\n" % body_size) + body
    assert send_raw(bounded_server, request).startswith(b"HTTP/1.1 200")


def test_a_header_block_dribbled_a_byte_at_a_time_past_the_bound_is_answered_431(bounded_server):
    with socket.create_connection(("127.0.0.1", bounded_server), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        with contextlib.suppress(OSError):
            for _ in range(20):  # 20 x 1 KiB writes: past the 16 KiB bound, no blank line
                conn.sendall(b"a" * 1024)
                time.sleep(0.01)
        assert conn.recv(200).startswith(b"HTTP/1.1 431")


@pytest.mark.parametrize(("tail", "data", "expected"), [
    (b"", b"GET / HTTP/1.1\r\n\r\nBODY", 18), (b"\r\n", b"\r\nBODY", 2),
    (b"x\r", b"\n\r\nBODY", 3), (b"", b"no end yet", 10), (b"", b"GET /\n\nBODY", 7)])
def test_the_header_part_of_a_read_ends_at_the_first_blank_line(tail, data, expected):
    assert header_part(tail, data) == expected


def test_a_competition_holds_at_most_fifty_phases_and_phases_are_paginated(app_env):
    org = app_env.token_for("olp", role="organizer")
    many = {"slug": "many-phases", "title": "M",
            "phases": [{"name": f"p{i}", "status": "open"} for i in range(51)]}
    refused = app_env.client.post("/api/v1/competitions", headers=org, json=many)
    assert refused.status_code == 422, refused.text
    app_env.competition(org)
    app_env.competition(org)
    first = app_env.client.get("/api/v1/phases?limit=1", headers=org).json()
    second = app_env.client.get("/api/v1/phases?limit=1&offset=1", headers=org).json()
    assert len(first) == len(second) == 1 and first[0]["id"] < second[0]["id"]
    assert app_env.client.get("/api/v1/phases?limit=100000").status_code == 422
