"""The HTTP server's own bounds: a request's header block, before any application code runs.

uvicorn's h11 protocol checks h11's `max_incomplete_event_size` only while an event is still
incomplete, and a header block that arrives faster than it is parsed escapes it: a 100 MB
header was accepted (+97 MB of memory per request, issue 21). `BoundedH11Protocol` counts the
bytes received while a request's headers are still being read and answers 431 (then closes)
once they pass `max_header_bytes`. Bodies are bounded by each route (uploads stream to disk
with a cap; JSON and bundle bodies are read with a cap of their own).
"""

from __future__ import annotations

import re
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_MAX_HEADER_BYTES = 64 * 1024
"""Request line plus headers; browsers send a few KiB, cookies and tokens included."""


def bounded_h11_protocol(max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> type[H11Protocol]:
    """An H11Protocol class that refuses header blocks over `max_header_bytes` with 431."""

    class BoundedH11Protocol(H11Protocol):
        _header_bytes = 0
        _tail = b""

        def data_received(self, data: bytes) -> None:
            # IDLE: the next request's line and headers are still being read. Only the bytes up
            # to the blank line that ends them count: the body often arrives in the same read
            # (a busy server reads later, the kernel coalesces), and counting it refused every
            # upload whose first read passed the bound (issue 32). (Pipelined data during a
            # response is not counted: uvicorn pauses reading meanwhile.)
            if self.conn.their_state is h11.IDLE:
                self._header_bytes += header_part(self._tail, data)
                self._tail = (self._tail + data)[-2:]
                if self._header_bytes > max_header_bytes:
                    self._refuse()
                    return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                # the headers were complete; the next request counts anew
                self._header_bytes, self._tail = 0, b""

        def _refuse(self) -> None:
            body = (b'{"error": {"code": "request.headers_too_large", "message": "the request '
                    b'headers exceed %d bytes; send fewer or smaller headers", '
                    b'"family": "participant"}}' % max_header_bytes)
            head = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                    b"content-type: application/json\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n" % len(body))
            if not self.transport.is_closing():
                self.transport.write(head + body)
                self.transport.close()

    return BoundedH11Protocol


_HEADER_END = re.compile(rb"\n\r?\n")
"""The blank line that ends a header block, as h11 finds it (`\n\r?\n`)."""


def header_part(tail: bytes, data: bytes) -> int:
    """How many bytes of `data` belong to the header block, given the last bytes received before
    it (`tail`, at most 2): all of them, or those up to and including the first blank line."""
    end = _HEADER_END.search(tail + data)
    return len(data) if end is None else max(0, end.end() - len(tail))


ACCEPTING_LOOP = "asyncio"
"""The event loop the server runs on. uvloop's libuv (>= 1.45, libuv#3696) accepts one new
connection per turn of the loop: at 1,000 readers on 2 loaded cores a turn took ~0.1 s, so new
connections waited ~10 s (p50; p95 25 s) in the kernel's accept queue before the server saw
them, and a reader that honoured Retry-After and came back on a new connection got its 503
that late (issue 38.5, docs/performance.md). asyncio's loop accepts every pending connection
(up to the backlog) in one turn."""


def uvicorn_bounds(max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run`/`uvicorn.Config` that apply these bounds (and the
    loop that accepts new connections as they come, ACCEPTING_LOOP)."""
    return {"http": bounded_h11_protocol(max_header_bytes),
            "h11_max_incomplete_event_size": max_header_bytes, "loop": ACCEPTING_LOOP}
