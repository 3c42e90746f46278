"""How much text crosses a seam: exception messages, tracebacks, run messages, log tails.

One rule for which end is kept: an exception's message keeps its head (its first words say
what went wrong), a traceback and a log tail keep their end (the innermost frames and the
exception line are there). The server's wire models refuse anything longer than these caps,
and the worker and runner cut to them, so no call is refused for length.
"""

from __future__ import annotations

ERROR_CAP = 2000
"""An exception's text, as quoted in a run's message (head kept)."""
TRACE_CAP = 20_000
"""A traceback (tail kept)."""
MESSAGE_CAP = 20_000
"""A run's message (`finish.message`), a release's error and detail."""
FAULT_CAP = 4000
"""A platform fault's short cause, as stored on the run (head kept)."""
LOG_TAIL_CAP = 4000
"""The last lines of a running run's log shown while it runs (tail kept)."""
REASON_CAP = 64
"""A failure reason key."""
NOTE_CAP = 2000
"""A note stored beside an accepted upload (head kept)."""


def cap_head(text: str, limit: int) -> str:
    """`text` cut to its first `limit` characters."""
    return text[:limit]


def cap_tail(text: str, limit: int) -> str:
    """`text` cut to its last `limit` characters."""
    return text[-limit:] if limit > 0 else ""


def cap_error(text: str) -> str:
    """An exception's text as a message quotes it (`ERROR_CAP`, head)."""
    return cap_head(text, ERROR_CAP)


def cap_trace(text: str | None) -> str | None:
    """A traceback as stored (`TRACE_CAP`, tail); None for none or an empty one."""
    return cap_tail(text, TRACE_CAP) or None if text else None
