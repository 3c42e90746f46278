"""Load shedding at admission (issue 38.5): past a bounded queue, or past the longest wait, a
request is answered 503 with Retry-After at once instead of waiting until the client gives up;
the workers' internal API keeps a lane of its own. A real uvicorn server on 127.0.0.1, a gated
app, and the middleware's own waiting count to order the requests (no timing is asserted)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from server.core.admission import AdmissionMiddleware


class GatedApp:
    """`/slow` holds its slot until `gate` is set; anything else answers at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.inside = 0  # requests on /slow that were admitted

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] != "http":
            return
        self.inside += scope["path"] == "/slow"
        while scope["path"] == "/slow" and not self.gate.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def serve(app) -> Iterator[str]:  # noqa: ANN001
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(400):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def wait_for(predicate, what: str) -> None:  # noqa: ANN001
    for _ in range(1000):
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"never saw {what}")


@pytest.fixture
def gated():
    inner = GatedApp()
    middleware = AdmissionMiddleware(inner, limit=1, max_waiting=2, max_wait_s=120)
    for url in serve(middleware):
        yield url, inner, middleware
    inner.gate.set()


def test_past_the_bounded_queue_a_request_is_answered_503_at_once_and_the_rest_are_served(gated):
    url, app, middleware = gated
    with ThreadPoolExecutor(4) as pool:
        held = [pool.submit(httpx.get, f"{url}/slow", timeout=120) for _ in range(3)]
        wait_for(lambda: middleware.waiting == 2, "two requests waiting")
        refused = httpx.get(f"{url}/slow", timeout=120)
        assert refused.status_code == 503
        assert int(refused.headers["retry-after"]) > 0
        assert refused.json()["error"]["code"] == "server.busy"
        internal = httpx.get(f"{url}/internal/runs/1/heartbeat", timeout=120)
        assert internal.status_code == 200  # the workers' lane does not queue behind readers
        app.gate.set()
        assert [f.result().status_code for f in held] == [200, 200, 200]
    assert middleware.shed == 1


def test_a_request_that_waits_past_the_longest_wait_is_answered_503():
    inner = GatedApp()
    middleware = AdmissionMiddleware(inner, limit=1, max_waiting=10, max_wait_s=0.5)
    for url in serve(middleware):
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(httpx.get, f"{url}/slow", timeout=120)
            wait_for(lambda: inner.inside == 1, "the first request admitted")
            late = httpx.get(f"{url}/slow", timeout=120)
            assert late.status_code == 503, late.text
            assert "no slot freed" in late.json()["error"]["message"]
            inner.gate.set()
            assert first.result().status_code == 200


def test_the_workers_lane_is_the_prefix_the_app_serves_the_internal_api_under(tmp_path):
    """The lane named `/api/v1/internal/` while the workers' routes live under `/internal/`:
    their claims and finishes queued (and could be shed) behind readers."""
    from fastapi import routing

    from server.app import create_app
    from server.core.admission import INTERNAL_PREFIX
    from server.core.config import Settings

    app = create_app(Settings(data_dir=tmp_path, reconcile_interval_s=0))
    paths = [context.path for context in routing.iter_route_contexts(app.routes)]
    internal = [path for path in paths if path.endswith("/claim")]
    assert internal and all(path.startswith(INTERNAL_PREFIX) for path in internal), internal
