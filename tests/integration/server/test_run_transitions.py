"""Every run state change goes through the contract's TRANSITIONS table (issue 35.2): the table
decides which source states an UPDATE accepts, and a forbidden move is an error, not a write."""

from __future__ import annotations

import pytest
from test_runs import call, claim, finish_body, queued_run, run_row

from server.services.run_transitions import guarded_update, move_run, sources
from submission_api.contract.states import TRANSITIONS, IllegalTransition, RunState


def test_sources_are_read_from_the_table():
    for target in RunState:
        assert set(sources(target)) == {s for s, goals in TRANSITIONS.items() if target in goals}
    assert sources(RunState.PREPARING) == (RunState.QUEUED,)


def test_a_forbidden_pair_is_an_error_and_writes_nothing(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    assert claim(env, run_id, token).status_code == 200
    with env.db.session(write=True) as session:
        with pytest.raises(IllegalTransition, match="'finished'.*'queued'"):
            move_run(session, run_id, RunState.QUEUED, among=[RunState.FINISHED])
        with pytest.raises(IllegalTransition, match="move_run"):  # no way around the table
            guarded_update(session, run_id, [], {"state": RunState.QUEUED})
    assert run_row(env, run_id).state == RunState.PREPARING


def test_taking_an_edge_out_of_the_table_refuses_the_claim(env, monkeypatch):
    """A run whose lease lapsed is claimed again through the table's release edge (running ->
    queued): without that edge the same claim is refused."""
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    body = {"fencing_token": fencing, "stage": "running"}
    assert call(env, run_id, token, "heartbeat", body).status_code == 200
    env.clock.advance(seconds=3600)
    monkeypatch.setitem(TRANSITIONS, RunState.RUNNING,
                        TRANSITIONS[RunState.RUNNING] - {RunState.QUEUED})
    answer = claim(env, run_id, token, worker="w2")
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "run.not_claimable"
    assert run_row(env, run_id).state == RunState.RUNNING
    monkeypatch.undo()
    assert claim(env, run_id, token, worker="w2").status_code == 200
    assert run_row(env, run_id).lease_owner == "w2"


def test_taking_an_edge_out_of_the_table_makes_the_move_a_bug(env, monkeypatch):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    monkeypatch.setitem(TRANSITIONS, RunState.PREPARING,
                        TRANSITIONS[RunState.PREPARING] - {RunState.FINISHED})
    with pytest.raises(IllegalTransition, match="'preparing'.*'finished'"):
        call(env, run_id, token, "finish", finish_body(fencing))
    assert run_row(env, run_id).state == RunState.PREPARING
