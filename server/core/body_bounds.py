"""One bound on every request body that is not a streamed upload (issue 21, principle 5).

Bundles had their own cap (1 MiB, api/bundles.py); every other JSON body (competitions, phases,
pages, tokens, the internal API's finish), and every form, was read whole by the framework with
no bound but uvicorn's. `BodyBoundsMiddleware` reads such a body before the app sees it, up to
`Settings.max_json_body_bytes` (the declared length is checked first, then the bytes as they
come, so a body without a length or with a false one is bounded too), and answers 413
`request.too_large` with the usual JSON error body naming the bound. Multipart bodies (the
submission and dataset uploads) are streamed to disk by their routes, with their own bounds,
and pass untouched. A bundle route gets the larger of the two bounds (its own message names
its own cap), the internal API `max_internal_body_bytes` (a finish carries up to 100,000
per-task results and the run's log).

It sits outside admission (server/core/admission.py): a slow body is read without holding one
of the app's slots.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


class BodyBoundsMiddleware:
    """Refuse with 413 any non-multipart request body over its path's bound."""

    def __init__(self, app: ASGIApp, limit: int, bundle_limit: int, internal_limit: int) -> None:
        self.app = app
        self.limit, self.bundle_limit, self.internal_limit = limit, bundle_limit, internal_limit

    def limit_for(self, path: str) -> int:
        if path.startswith("/internal/"):
            return self.internal_limit
        if path.endswith("/bundle"):
            return max(self.limit, self.bundle_limit)
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] in BODYLESS
                or _header(scope, b"content-type").startswith(b"multipart/form-data")):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _header(scope, b"content-length")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(send, limit, f"declares {int(declared)} bytes")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(send, limit, f"is over {limit} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # the disconnect, when the app waits for it
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return b""


async def _refuse(send: Send, limit: int, what: str) -> None:
    body = json.dumps({"error": {
        "code": "request.too_large", "family": "participant", "details": {"max_bytes": limit},
        "message": f"the request body {what}; at most {limit} bytes are accepted here "
                   "(ARENA_MAX_JSON_BODY_BYTES) — send less, or upload files as "
                   "multipart/form-data where a route takes them"}}).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
