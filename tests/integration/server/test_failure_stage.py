"""Where a run failed travels as a typed field of the finish body (issue 35.3), and the secrecy
rule reads it, not the message's words: a meta-train failure keeps its text whatever it says,
a meta-test one is redacted even when its text looks like meta-train's; a body from an older
worker (no stage) is redacted whatever its message says (the words are not read back)."""

from __future__ import annotations

import pytest
from test_run_progress import _claim

from submission_api.contract.record import ResultRecord
from submission_api.contract.verdict import decide_verdict
from submission_api.runner.scorer import read_reported_status
from worker.pipeline.score import verdict_outcome

SECRET = "PIXELS-7a6b"


def _failed(env, body: dict) -> tuple[dict, dict]:
    """(the owner's view, the organizer's view) of a secret-data submission failed by `body`."""
    olga, organizer = env.user("olga", role="organizer")
    _, headers = env.user("ann")
    phase_id = env.phase(owner=olga, hide_logs=False, leaderboard={"test_data": "secret"}).id
    created = env.submit(phase_id, headers).json()
    run_id = created["runs"][0]["id"]
    bearer, fencing = _claim(env, run_id)
    answer = env.client.post(f"/internal/runs/{run_id}/finish", headers=bearer,
                             json={"fencing_token": fencing, "state": "failed"} | body)
    assert answer.status_code == 200, answer.text
    url = f"/api/v1/submissions/{created['id']}"
    return (env.client.get(url, headers=headers).json(),
            env.client.get(url, headers=organizer).json())


def _messages(view: dict) -> str:
    return view["message"] + "".join(r["message"] or "" for r in view["runs"])


def test_a_meta_train_stage_keeps_its_text_whatever_it_says(env):
    owner, _ = _failed(env, {"reason": "meta_fit_error", "stage": "meta_fit",
                             "message": "the learning rate must be positive (got -1)"})
    assert "got -1" in owner["message"] and "got -1" in owner["runs"][0]["message"]
    assert owner["runs"][0]["failure_stage"] == "meta_fit"


def test_meta_test_text_is_hidden_even_when_it_reads_like_meta_train(env):
    owner, staff = _failed(env, {"reason": "meta_fit_error", "stage": "meta_test",
                                 "message": f"meta_fit raised: {SECRET}"})
    assert SECRET not in _messages(owner) and "stage: meta-test" in owner["message"]
    assert SECRET in _messages(staff)


def test_a_test_task_stage_is_named_in_the_redacted_text(env):
    owner, _ = _failed(env, {"reason": "fit_error", "stage": "load",
                             "message": f"load raised on test task 3: {SECRET}\n\nTraceback\n"
                                        f"KeyError: {SECRET}"})
    assert SECRET not in _messages(owner)
    assert "KeyError; stage: load)" in owner["runs"][0]["message"]


@pytest.mark.parametrize(("reason", "message"), [
    ("meta_fit_error", f"meta_fit raised: {SECRET}"),
    ("fit_error", f"fit raised on test task 2: {SECRET}")])
def test_an_older_worker_without_a_stage_is_redacted_whatever_its_words(env, reason, message):
    owner, organizer = _failed(env, {"reason": reason, "message": message})
    assert SECRET not in _messages(owner) and SECRET in _messages(organizer)
    assert owner["runs"][0]["failure_stage"] is None


def test_an_unknown_stage_is_refused(env):
    with pytest.raises(AssertionError, match="422"):
        _failed(env, {"reason": "fit_error", "stage": "training", "message": "x"})


@pytest.mark.parametrize(("status", "stage"), [
    ('{"stage": "meta_fit", "error": "bad lr"}', "meta_fit"),
    ('{"stage": "predict", "task": 2, "error": "x"}', "predict"),
    # a meta-train stage named with a test task is a forgery: placed in meta-test
    ('{"stage": "meta_fit", "task": 0, "error": "x"}', "meta_test"),
    ('{"stage": "meta_test"}', "meta_test"),
])
def test_the_worker_sends_where_the_verdict_placed_the_failure(tmp_path, status, stage):
    (tmp_path / "status.json").write_text(status)
    record = ResultRecord(exit_code=1, status=read_reported_status(tmp_path))
    assert verdict_outcome(decide_verdict(record)).to_finish_body(1)["stage"] == stage


def test_the_platform_and_internal_error_keys_are_the_contracts():
    """Issue 35.3: the server and the worker retyped `internal_error`/`platform_error` beside
    the enum; both now read the contract's."""
    from server.services import runs
    from submission_api.contract import reasons
    from worker.pipeline import faults

    assert runs.INTERNAL_ERROR_FLAG is faults.INTERNAL_ERROR_FLAG is reasons.INTERNAL_ERROR_FLAG
    assert runs.INTERNAL_ERROR == reasons.FailureReason.INTERNAL_ERROR
    assert faults.PHASE_ERROR == reasons.FailureReason.PLATFORM_ERROR
