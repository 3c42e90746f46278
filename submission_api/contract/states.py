"""Run states and the transitions between them: the one table server, worker and runner share.

A run is `queued` in the database, moves forward through the active stages a worker reports
(`preparing` -> `running` -> `scoring`), and ends in one terminal state. The only way back is a
release after a platform fault (or a lost lease): an active run returns to `queued` and a fresh
attempt starts. A terminal state is final; a re-run makes new runs, it never reopens one.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    """Where one run stands; the values are what the database and the wire carry."""

    QUEUED = "queued"
    PREPARING = "preparing"
    RUNNING = "running"
    SCORING = "scoring"
    FINISHED = "finished"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


ACTIVE_STATES: tuple[RunState, ...] = (RunState.PREPARING, RunState.RUNNING, RunState.SCORING)
"""The stages a worker reports in its heartbeats, in the order a run goes through them."""
TERMINAL_STATES: tuple[RunState, ...] = (RunState.FINISHED, RunState.FAILED, RunState.TIMED_OUT,
                                         RunState.CANCELLED)
FINISH_STATES: tuple[RunState, ...] = (RunState.FINISHED, RunState.FAILED, RunState.TIMED_OUT)
"""The terminal states a worker may publish with `finish` (cancelling is the server's)."""

TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({*ACTIVE_STATES, RunState.FAILED, RunState.CANCELLED}),
    RunState.PREPARING: frozenset({RunState.RUNNING, RunState.SCORING, RunState.QUEUED,
                                   *TERMINAL_STATES}),
    RunState.RUNNING: frozenset({RunState.SCORING, RunState.QUEUED, *TERMINAL_STATES}),
    RunState.SCORING: frozenset({RunState.QUEUED, *TERMINAL_STATES}),
    **{state: frozenset() for state in TERMINAL_STATES},
}
"""Allowed moves. Active stages only go forward (a late heartbeat never demotes a run); `queued`
from an active stage is a release or an expired lease; `failed` from `queued` is the reconciler
giving up after too many platform faults."""


class IllegalTransition(ValueError):
    """A run was asked to move along an edge `TRANSITIONS` does not hold."""


def _state(name: str) -> RunState | None:
    try:
        return RunState(name)
    except ValueError:
        return None


def can_move(current: str, target: str) -> bool:
    """Whether a run in `current` may move to `target` (unknown names: never)."""
    source, goal = _state(current), _state(target)
    return source is not None and goal is not None and goal in TRANSITIONS[source]


def check_transition(current: str, target: str) -> RunState:
    """The target state, if a run in `current` may move there.

    Raises:
        IllegalTransition: the move is not in `TRANSITIONS` (or a name is not a state).
    """
    if not can_move(current, target):
        source = _state(current)
        allowed = sorted(TRANSITIONS[source]) if source is not None else []
        raise IllegalTransition(f"a run in state {current!r} cannot move to {target!r}; "
                                f"allowed from there: {allowed or 'none'}")
    return RunState(target)


def is_terminal(state: str) -> bool:
    """Whether `state` is final (nothing moves a run out of it)."""
    return state in TERMINAL_STATES
