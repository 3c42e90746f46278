"""How many requests the app works on at once, how many may wait, and who is shed.

A request takes a pooled connection in its first dependency and keeps it until it ends, while
it waits (between dependencies and the handler) for a worker thread. With more requests in
flight than connections, requests holding connections wait for threads held by requests
waiting for connections: at 80 concurrent readers the 30-connection pool timed out into
71 x 500 (issue 21). `AdmissionMiddleware` lets at most `limit` requests into the app at once;
the others wait their turn on a semaphore (a coroutine each, no connection, no thread), so the
pool (`Settings.db_pool`: two connections per admitted request, a read and a write session,
plus headroom) can never run dry.

Waiting is bounded (issue 38): an unbounded queue turned 1,000 readers into 60 s client
time-outs for everyone, uploads and workers included. A request that finds `max_waiting`
others already waiting, or that waits longer than `max_wait_s`, is answered 503
`server.busy` with Retry-After at once, so the excess learns to come back while the admitted
keep their latency. The workers' internal API has a lane of its own (`internal_limit` slots,
never shed): a run's claim, heartbeat and finish must not queue behind a crowd of readers.
Multipart uploads are not counted: they hold no session while they stream (core/multipart.py)
and have their own gate (services/upload_gate.py).
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Receive, Scope, Send

INTERNAL_PREFIX = "/internal/"
"""The workers' API (server/api/internal.py): its own lane, never shed."""


class AdmissionMiddleware:
    """Admit at most `limit` HTTP requests into `app` at once; at most `max_waiting` wait, each
    at most `max_wait_s`; the rest are answered 503 with Retry-After."""

    def __init__(self, app: ASGIApp, limit: int, max_waiting: int | None = None,
                 max_wait_s: float = 20.0, internal_limit: int = 4,
                 retry_after_s: int = 5) -> None:
        self.app = app
        self.limit = limit
        self.max_waiting = 8 * limit if max_waiting is None else max_waiting
        self.max_wait_s = max_wait_s
        self.internal_limit = internal_limit
        self.retry_after_s = retry_after_s
        self.waiting = 0
        self.shed = 0
        """Requests answered 503 so far (a benchmark reads it to see shedding happen)."""
        self._slots: asyncio.Semaphore | None = None  # made in the server's event loop
        self._internal: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_streamed_upload(scope):
            await self.app(scope, receive, send)
            return
        if self._slots is None or self._internal is None:
            self._slots = asyncio.Semaphore(self.limit)
            self._internal = asyncio.Semaphore(self.internal_limit)
        if scope.get("path", "").startswith(INTERNAL_PREFIX):
            async with self._internal:
                await self.app(scope, receive, send)
            return
        if self._slots.locked() and self.waiting >= self.max_waiting:
            await self._refuse(send, f"{self.waiting} requests are already waiting")
            return
        self.waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=self.max_wait_s)
        except TimeoutError:
            await self._refuse(send, f"no slot freed within {self.max_wait_s:g} s")
            return
        finally:
            self.waiting -= 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._slots.release()

    async def _refuse(self, send: Send, why: str) -> None:
        self.shed += 1
        body = json.dumps({"error": {
            "code": "server.busy", "family": "platform",
            "message": f"the server is busy ({why}); retry after {self.retry_after_s} s"}})
        headers = [(b"content-type", b"application/json"),
                   (b"retry-after", str(self.retry_after_s).encode()),
                   (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body.encode()})


def _is_streamed_upload(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return bool(value.startswith(b"multipart/form-data"))
    return False
