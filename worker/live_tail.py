"""The last lines of a running run's stdout and stderr, for the participant watching it.

The executors' log capture (the Docker stream pump, the local mode's pipe pumps) tees every
chunk here as it arrives, both streams interleaved in arrival order; the heartbeat reads
`text()` with each beat and sends it as `progress.log_tail`, so the tail reaches the server no
more often than the heartbeat interval. The full, head-and-tail-capped log still arrives with
`finish`. The server shows the tail only where the owner may read meta-test output
(server/services/secrecy.py: public test data, logs not hidden); organizers always.

Memory stays within `LOG_TAIL_CAP` bytes: decoded, that is at most `LOG_TAIL_CAP` characters,
the contract's cap on the wire (a replaced invalid byte is one character). Participant text:
made storable (NUL, lone surrogates) here, rendered visible where it is shown.
"""

from __future__ import annotations

import threading

from submission_api.contract.caps import LOG_TAIL_CAP
from submission_api.storable_text import storable_text

STAGE_MARK = "==> {stage} <==\n"
"""Written by the worker (not the participant) when a stage starts."""


class LiveTail:
    """A thread-safe ring of the last `cap` bytes written to a run's stdout or stderr."""

    def __init__(self, cap: int = LOG_TAIL_CAP) -> None:
        self._cap = cap
        self._data = bytearray()
        self._cut = False
        self._lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        """Add a chunk of output (called from the log pump threads)."""
        with self._lock:
            self._data += chunk
            excess = len(self._data) - self._cap
            if excess > 0:
                del self._data[:excess]
                self._cut = True

    def mark(self, stage: str) -> None:
        """Note that a stage starts, so the reader tells meta-train from meta-test lines."""
        self.append(STAGE_MARK.format(stage=stage).encode())

    def text(self) -> str | None:
        """The kept tail as storable text, starting at a whole line once the ring has cut
        (the first line would be a fragment); None while nothing was written."""
        with self._lock:
            data, cut = bytes(self._data), self._cut
        if cut:
            newline = data.find(b"\n")
            if 0 <= newline < len(data) - 1:
                data = data[newline + 1:]
            data = data.lstrip(bytes(range(0x80, 0xC0)))  # a character split by the ring
        text = data.decode("utf-8", errors="replace")
        return storable_text(text[-self._cap:]) or None
