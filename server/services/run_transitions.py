"""Every change of a run's state goes through here, and the contract's table decides it.

`move_run` is one compare-and-set UPDATE: it sets the target state only when the run is in a
state that `submission_api.contract.states.TRANSITIONS` lets move there (and the caller's own
conditions hold: the fencing token, a lapsed lease). The table, not the caller, lists the
source states, so editing it changes what the server does; a caller that names a source the
table forbids is a bug and gets `IllegalTransition` before anything is written. Writes that do
not change the state (a lease extension, a fresh run token) use `guarded_update`, which refuses
a `state` value for that reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, or_, update
from sqlalchemy.orm import Session

from server.core.db import count_changed
from server.models import Run
from submission_api.contract.states import (
    ACTIVE_STATES,
    TRANSITIONS,
    IllegalTransition,
    RunState,
    check_transition,
)

__all__ = ["IllegalTransition", "guarded_update", "move_run", "sources"]


def guarded_update(session: Session, run_id: int, conditions: Sequence[Any],
                   values: Mapping[str, Any]) -> bool:
    """Apply `values` (never the state: see `move_run`) to the run only if every condition
    holds; True if a row changed."""
    if "state" in values:
        raise IllegalTransition("a run's state changes only through move_run, which checks "
                                "the contract's TRANSITIONS table")
    stmt = (update(Run).where(Run.id == run_id, *conditions).values(**values)
            .execution_options(synchronize_session=False))
    return count_changed(session, stmt) == 1


def sources(target: RunState, among: Iterable[RunState] | None = None) -> tuple[RunState, ...]:
    """The states a run may leave for `target` by the table; with `among`, those states,
    each checked against the table (IllegalTransition names the first forbidden one)."""
    if among is None:
        return tuple(state for state, goals in TRANSITIONS.items() if target in goals)
    chosen = tuple(RunState(state) for state in among)
    for state in chosen:
        check_transition(state.value, target.value)
    return chosen


def move_run(session: Session, run_id: int, target: RunState,
             values: Mapping[str, Any] | None = None, conditions: Sequence[Any] = (), *,
             among: Iterable[RunState] | None = None,
             reclaim: ColumnElement[bool] | None = None) -> bool:
    """Move the run to `target` (and write `values`) in one guarded UPDATE; True if it moved.

    The run must be in one of `sources(target, among)` and meet `conditions`. `reclaim` is the
    condition under which an active run whose lease lapsed moves too: the table's release edge
    (active -> queued) and then queued -> `target`, taken in the same single write.
    """
    target = RunState(target)
    guard: ColumnElement[bool] = Run.state.in_(sources(target, among))
    if reclaim is not None:
        check_transition(RunState.QUEUED.value, target.value)
        released = [state for state in sources(RunState.QUEUED) if state in ACTIVE_STATES]
        guard = or_(guard, Run.state.in_(released) & reclaim)
    stmt = (update(Run).where(Run.id == run_id, guard, *conditions)
            .values(**{**(values or {}), "state": target.value})
            .execution_options(synchronize_session=False))
    return count_changed(session, stmt) == 1
