"""The two families of failure a pipeline step can raise, so that `evaluate` decides in one place.

A `PlatformFault` is the infrastructure's (cache, disk, Docker, server): the run is released,
re-queued by the server and never charged. A `ParticipantFault` is the submission's: the run
ends `failed` with its reason and a message that says how to fix it.
"""

from __future__ import annotations


class PlatformFault(Exception):
    """Infrastructure failed; the run goes back to the queue, uncharged."""


class CacheCorruptError(PlatformFault):
    """A cached or downloaded file does not match its content hash; it has been removed."""


class ParticipantFault(Exception):
    """The submission caused the failure; `reason` is one of the run failure reasons."""

    def __init__(self, reason: str, message: str, traceback: str | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.traceback = reason, message, traceback
