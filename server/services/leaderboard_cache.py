"""The ranked board of a phase, kept between requests until something that decides it changes.

Ranking reads every finished submission of the phase (10,000 rows on a busy board); a page shows
100. Between two finished runs nothing changes, so the ranked list is kept in this process and
reused while the phase's *fingerprint* is the same: one aggregate over the phase's submissions
(indexed by phase) that moves whenever a submission finishes, is re-run, selected, marked as
baseline, disqualified or changes league, plus the phase's own ranking settings. A stale board is
therefore never served; a miss costs one aggregate more than before.

Per engine (so two apps in one process, as in tests, never share a board) and per process
(every server process keeps its own), bounded to `MAX_BOARDS`; thread-safe. Single flight: on a
miss, one request computes the value for that (phase, league, fingerprint) while the others
asking for the same one wait for it (issue 21: after a board changed, 10 concurrent readers
each recomputed it and its statistics, 2.7-5.2 s each).
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from server.core.gc_pause import gc_paused
from server.models import Phase, Submission
from server.services import leaderboard
from server.services.leaderboard import Ranked
from server.services.leaderboard_delta import BoardState, build_board, update_board

MAX_BOARDS = 64
FLIGHT_WAIT_S = 60.0
"""How long a reader waits for another's computation before computing the board itself."""
T = TypeVar("T")
Fingerprint = tuple[Any, ...]


class FingerprintCache(Generic[T]):
    """Values computed from a phase's board (the ranked list, its statistics), kept per engine
    and per (phase, league) while the phase's fingerprint holds; bounded, thread-safe."""

    def __init__(self, max_boards: int) -> None:
        self.max_boards = max_boards
        self._lock = threading.Lock()
        self._caches: weakref.WeakKeyDictionary[
            Any, OrderedDict[Hashable, tuple[Fingerprint, T]]] = weakref.WeakKeyDictionary()
        self._flights: weakref.WeakKeyDictionary[
            Any, dict[Hashable, tuple[Fingerprint, threading.Event]]] = weakref.WeakKeyDictionary()
        self.computations = 0
        """How many times a value was computed (misses that ran `compute`), for benchmarks
        and tests that check single flight (issue 38.4)."""

    def get(self, session: Session, phase: Phase, league: Hashable,
            compute: Callable[[], T]) -> T:
        """The value for the phase's current fingerprint, computed by `compute` on a miss (by
        one caller at a time per key; the others wait for its value)."""
        key = (phase.id, league)
        fingerprint = compute_fingerprint(session, phase)
        engine = session.get_bind()
        while True:
            with self._lock:
                boards = self._caches.setdefault(engine, OrderedDict())
                hit = boards.get(key)
                if hit is not None and hit[0] == fingerprint:
                    boards.move_to_end(key)
                    return hit[1]
                flights = self._flights.setdefault(engine, {})
                found = flights.get(key)
                leader = found is None or found[0] != fingerprint
                if found is None or leader:
                    flight = (fingerprint, threading.Event())
                    flights[key] = flight
                else:
                    flight = found
            if leader:
                break
            flight[1].wait(FLIGHT_WAIT_S)  # then look again; compute ourselves if it failed
            with self._lock:
                if self._flights.get(engine, {}).get(key) is flight:
                    break  # the leader is stuck or failed: compute ourselves
        try:
            with self._lock:
                self.computations += 1
            value = compute()
            with self._lock:
                boards[key] = (fingerprint, value)
                boards.move_to_end(key)
                while len(boards) > self.max_boards:
                    boards.popitem(last=False)
            return value
        finally:
            with self._lock:
                if self._flights.get(engine, {}).get(key) is flight:
                    del self._flights[engine][key]
            flight[1].set()

    def last(self, session: Session, phase: Phase, league: Hashable) -> T | None:
        """The value kept for (phase, league) whatever its fingerprint (a base to update)."""
        with self._lock:
            boards = self._caches.get(session.get_bind())
            hit = None if boards is None else boards.get((phase.id, league))
            return None if hit is None else hit[1]

    def size(self, session: Session) -> int:
        with self._lock:
            return len(self._caches.get(session.get_bind(), ()))


_boards: FingerprintCache[BoardState] = FingerprintCache(MAX_BOARDS)
_kinds = {"rebuilt": 0, "updated": 0}


def compute_fingerprint(session: Session, phase: Phase) -> Fingerprint:
    """What the ranked board of `phase` depends on, cheaply: counts and sums over its
    submissions that change with any state, score, selection, baseline, disqualification or
    league change, and its ranking settings."""
    flags = (Submission.id * (1 + case((Submission.is_selected, 2), else_=0)
                              + case((Submission.is_baseline, 4), else_=0)
                              + case((Submission.disqualified_at.is_not(None), 8), else_=0)))
    row = session.execute(
        select(func.count(Submission.id), func.max(Submission.finished_at),
               func.sum(flags), func.sum(func.coalesce(Submission.score, 0.0)),
               func.count(Submission.league), func.max(Submission.id),
               func.sum(case((Submission.state == "finished", Submission.id), else_=0)),
               func.sum(func.coalesce(Submission.team_id, 0)))  # a member joined a team
        .where(Submission.phase_id == phase.id)).one()
    settings = json.dumps([phase.leaderboard, phase.leaderboard_rule, phase.protocol,
                           phase.created_at, phase.competition_id], sort_keys=True, default=str)
    return (*(str(v) for v in row), settings)


def board_computations() -> int:
    """How many ranked boards this process has computed, whole or updated (single flight: 50
    readers of a changed board add one)."""
    return _boards.computations


def board_computation_kinds() -> dict[str, int]:
    """How many of those were ranked whole (`rebuilt`) and how many brought up to date from
    the rows that changed (`updated`, `leaderboard_delta`)."""
    with _boards._lock:
        return dict(_kinds)


def cached_rank_leaderboard(session: Session, phase: Phase,
                            league: str | None = None) -> list[Ranked]:
    """`rank_leaderboard(session, phase, league)`, reused while the phase's fingerprint holds,
    and after a change updated from the rows that changed where it can be. The list returned is
    shared: callers copy it before reordering it."""
    def compute() -> BoardState:
        # ~100,000 live, acyclic objects for a whole ranking, 10,000 for an update: collecting
        # them found nothing
        with gc_paused():
            previous = _boards.last(session, phase, league)
            if previous is not None:
                updated = update_board(session, phase, league, previous)
                if updated is not None:
                    _count("updated")
                    return updated
            state = build_board(session, phase, league,
                                lambda *a: leaderboard._candidates(*a))  # looked up per call
        _count("rebuilt")
        return state

    return _boards.get(session, phase, league, compute).ranked


def _count(kind: str) -> None:
    with _boards._lock:
        _kinds[kind] += 1
