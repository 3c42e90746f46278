"""How many requests the app works on at once, so that the database pool can be sized from it.

A request takes a pooled connection in its first dependency and keeps it until it ends, while
it waits (between dependencies and the handler) for a worker thread. With more requests in
flight than connections, requests holding connections wait for threads held by requests
waiting for connections: at 80 concurrent readers the 30-connection pool timed out into
71 x 500 (issue 21). `AdmissionMiddleware` lets at most `limit` requests into the app at once;
the others wait their turn on a semaphore (a coroutine each, no connection, no thread), so the
pool (`Settings.db_pool`: two connections per admitted request, a read and a write session,
plus headroom) can never run dry. Multipart uploads are not counted: they hold no session
while they stream (api/uploads.py) and have their own gate (services/upload_gate.py).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send


class AdmissionMiddleware:
    """Admit at most `limit` HTTP requests into `app` at once; the rest wait in order."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._slots: asyncio.Semaphore | None = None  # made in the server's event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_streamed_upload(scope):
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        async with self._slots:
            await self.app(scope, receive, send)


def _is_streamed_upload(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return value.startswith(b"multipart/form-data")
    return False
