"""Text from the sandbox made storable once, at the boundary where the trusted side takes it.

Participant code decides every character of its messages, logs and exception text. Two kinds
cannot be stored or sent as they are: NUL (Postgres text columns refuse it) and lone UTF-16
surrogates such as `\\ud800` (a Python `str` may hold them, but they have no UTF-8 encoding,
so the worker's JSON body to the server raises `UnicodeEncodeError`, and a JSON body carrying
the escape `"\\ud800"` makes the server's database write fail). Either made `finish` fail
every time, and the run ended as an uncharged platform error: a free run at will (issue 21).
Both become U+FFFD. Other control characters (ESC, BEL, CR, C1, bidi) are storable: they are
kept, and rendered visible wherever a log is shown (`log_text.escape_controls`).

Pure Python: used by the worker before it sends and by the server before it writes.
"""

from __future__ import annotations

import re
from typing import Any, overload

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
MAX_JSON_DEPTH = 32
"""Nesting the worker's own bodies never reach; deeper values are cut (replaced by None)."""


@overload
def storable_text(text: str) -> str: ...


@overload
def storable_text(text: None) -> None: ...


def storable_text(text: str | None) -> str | None:
    """`text` with NUL and lone surrogates replaced by U+FFFD (None and "" unchanged)."""
    if not text:
        return text
    return _UNSTORABLE.sub(REPLACEMENT, text)


def storable_json(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON-like value whose every string (keys too) is `storable_text`."""
    if isinstance(value, str):
        return storable_text(value)
    if depth >= MAX_JSON_DEPTH:
        return None
    if isinstance(value, dict):
        return {storable_text(str(k)): storable_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v, depth + 1) for v in value]
    return value
