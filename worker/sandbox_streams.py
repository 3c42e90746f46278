"""Capture a container's stdout and stderr without letting a flood reach the worker's memory.

The driver attaches to the container before starting it and a thread drains the stream for the
whole run: the head and the tail of each stream are kept within `cap` bytes
(submission_api/log_text.py, the rule every log cap follows), the middle is read and dropped.
Each chunk is also teed, as it arrives, to an optional `LiveTail` (worker/live_tail.py) that the
heartbeat sends while the run goes on. Reading must go on past the cap, because an attach
client that stops reading blocks the container's writes (the run would then hang until its
wall-clock limit instead of finishing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from submission_api.log_text import HeadTailBuffer
from worker.live_tail import LiveTail

log = logging.getLogger(__name__)


class LogPump:
    """Drains a demultiplexed attach stream of `(stdout, stderr)` chunks on a daemon thread."""

    def __init__(self, frames: Iterable[tuple[bytes | None, bytes | None]], cap: int,
                 live_tail: LiveTail | None = None) -> None:
        self.stdout = HeadTailBuffer(cap)
        self.stderr = HeadTailBuffer(cap)
        self.error: BaseException | None = None
        self._live = live_tail
        self._frames = frames
        self._thread = threading.Thread(target=self._drain, name="sandbox-logs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _drain(self) -> None:
        try:
            for out, err in self._frames:
                if out:
                    self.stdout.append(out)
                if err:
                    self.stderr.append(err)
                if self._live is not None:
                    for chunk in (out, err):
                        if chunk:
                            self._live.append(chunk)
        except Exception as error:  # noqa: BLE001 - reported by the driver after the run
            self.error = error

    def join(self, timeout_s: float) -> bool:
        """Wait for the stream to end (it ends with the container); False if it did not."""
        self._thread.join(timeout_s)
        alive = self._thread.is_alive()
        if alive:
            log.warning("run.sandbox.log_stream_stuck", extra={"timeout_s": timeout_s})
        return not alive
