"""Strict-Transport-Security on every response of a deployment served over HTTPS.

Where session cookies are Secure the server is behind HTTPS, and a browser must never fall back
to plain HTTP for it: not after a page, nor after the login's redirect that sets the cookie, nor
after an API answer (issue 33.13: only rendered pages carried the header).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HSTS = "max-age=31536000; includeSubDomains"


class HstsMiddleware:
    """Add `Strict-Transport-Security: HSTS` to every HTTP response of `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_hsts(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() != b"strict-transport-security"]
                message = {**message, "headers": [
                    *headers, (b"strict-transport-security", HSTS.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_hsts)
