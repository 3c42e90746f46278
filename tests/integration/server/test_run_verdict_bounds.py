"""What a worker reports about hostile participant output is stored, and bugs are not free runs.

On 08e9140 a lone surrogate in a run's message made `finish` fail (500) every time, so the run
ended as an uncharged platform error: a free run at will. And a worker bug a participant could
trigger ended every such run uncharged, however often (issue 21).
"""

from __future__ import annotations

import json

import pytest
from test_runs import call, claim, queued_run, run_row

from server.models import Run, Submission


def finish_raw(env, run_id: int, token: str, body: dict):
    """POST JSON as Python's json module writes it: a lone surrogate travels as `\\ud800`."""
    return env.client.post(f"/internal/runs/{run_id}/finish", content=json.dumps(body),
                           headers={"Authorization": f"Bearer {token}",
                                    "Content-Type": "application/json"})


def test_a_lone_surrogate_escape_is_stored_replaced_never_a_500(env):
    """The worker makes text storable before it sends (worker/client.py); a body that still
    carries `\ud800` is made storable at the server's boundary too (U+FFFD), never a failed
    database write."""
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    answer = finish_raw(env, run_id, token, {
        "fencing_token": fencing, "state": "failed", "reason": "meta_fit_error",
        "message": "boom \ud800 end", "log": "\ud800", "summary": {}, "tasks": []})
    assert answer.status_code == 200, answer.text
    with env.db.session() as s:
        run = s.get(Run, run_id)
        assert (run.state, run.message) == ("failed", "boom \ufffd end")


@pytest.mark.parametrize("text", ["a\x00b", "boom \ufffd\x00 end", "\x00" * 3])
def test_a_message_log_and_summary_with_nul_are_stored_replaced(env, text):
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    answer = finish_raw(env, run_id, token, {
        "fencing_token": fencing, "state": "failed", "reason": "meta_fit_error",
        "message": text, "log": f"stdout\n{text}\n", "summary": {"note": text}, "tasks": []})
    assert answer.status_code == 200, answer.text
    row = run_row(env, run_id)
    assert (row.state, row.reason) == ("failed", "meta_fit_error")
    for stored in (row.message, row.log, row.summary["note"]):
        assert "\ufffd" in stored
        assert "\x00" not in stored and not any(0xD800 <= ord(c) <= 0xDFFF for c in stored)


def internal_error_body(fencing: int) -> dict:
    return {"fencing_token": fencing, "state": "failed", "reason": "platform_error",
            "message": "the platform failed while evaluating this run (an internal error)",
            "summary": {"internal_error": True}, "tasks": []}


def test_a_participants_fourth_internal_error_in_a_day_is_charged(env):
    phase = env.phase(quota_total=10)
    _, headers = env.user("ann")
    reasons = []
    for _ in range(5):
        answer = env.submit(phase.id, headers)
        assert answer.status_code == 201, answer.text
        run_id, token, _ = env.queue.jobs[-1]
        fencing = claim(env, run_id, token).json()["fencing_token"]
        assert call(env, run_id, token, "finish", internal_error_body(fencing)).status_code == 200
        reasons.append(run_row(env, run_id).reason)
        env.clock.advance(minutes=10)
    assert reasons == ["platform_error"] * 3 + ["internal_error"] * 2
    with env.db.session() as s:
        last = s.query(Submission).order_by(Submission.id.desc()).first()
        assert last.reason == "internal_error" and "charged" in last.message


def test_internal_errors_older_than_a_day_are_free_again(env):
    phase = env.phase(quota_total=10)
    _, headers = env.user("bob")
    reasons = []
    for day in range(2):
        for _ in range(3):
            env.submit(phase.id, headers)
            run_id, token, _ = env.queue.jobs[-1]
            fencing = claim(env, run_id, token).json()["fencing_token"]
            call(env, run_id, token, "finish", internal_error_body(fencing))
            reasons.append(run_row(env, run_id).reason)
        env.clock.advance(hours=25 * (day + 1))
    assert reasons == ["platform_error"] * 6
