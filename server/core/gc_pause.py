"""Pause Python's cyclic garbage collector while a request builds a large, short-lived result.

Ranking a 10,000-entry board makes ~100,000 container objects (rows, tuples, entries) in a
process whose heap already holds the app's hundreds of thousands: every 700 allocations start a
young collection and every few of those an older one that walks that heap. Measured on the first
read of a board after a change (benchmarks/bench_board_after_change.py), collection was ~90 ms of
~260 ms of server CPU, and collected nothing: the board's objects are acyclic and still alive.

The pause is process-wide (the collector has one switch), counted so that overlapping pauses in
several threads end with the last, and never re-enables a collector someone else turned off.
Reference counting frees acyclic garbage meanwhile; cycles made by other threads during the
pause wait for the next collection after it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_we_disabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off (unless it already was)."""
    global _depth, _we_disabled
    with _lock:
        if _depth == 0 and gc.isenabled():
            gc.disable()
            _we_disabled = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _we_disabled:
                _we_disabled = False
                gc.enable()
