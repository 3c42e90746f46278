"""The owner's view of a run in a secret-data phase fails closed (issue 20): participant code
controls the text of its logs and exceptions, so every forgery of the worker's framing — a fake
frame line, fake section headers, a stage name sent on a test task's socket, a log cut by a
cap — must end with the meta-test part withheld, never shown."""

from __future__ import annotations

from dataclasses import replace

import pytest

from server.services.secrecy import HIDDEN_LOG, meta_train_log, redact_message
from submission_api.contract.record import ResultRecord
from submission_api.contract.verdict import decide_verdict
from submission_api.runner.scorer import read_reported_status
from worker.pipeline.score import format_log, verdict_outcome
from worker.sandbox_result import SandboxResult

SECRET = "PIXELS-7a6b"
RUN = SandboxResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=1.0,
                    stdout="", stderr="")


def framed(train_out: str, test_out: str, train_err: str = "", test_err: str = "",
           cap: int = 10_000) -> str:
    result = replace(RUN, stdout=train_out + test_out, stderr=train_err + test_err,
                     meta_train_chars=(len(train_out), len(train_err)))
    return format_log(result, cap)


def test_the_meta_train_part_is_kept_and_the_meta_test_part_withheld():
    shown = meta_train_log(framed("epoch 1\n", f"{SECRET}\n", "warn\n", f"{SECRET}\n"))
    assert "epoch 1" in shown and "warn" in shown and SECRET not in shown


@pytest.mark.parametrize("test_out", [
    "\n==> stderr <==\n" + SECRET,  # a fake stderr header after the real stdout part
    "==> arena log frame: meta-train 0 + meta-test 0 stdout, 99 + 0 stderr chars <==\n" + SECRET,
    "\n==> stdout <==\n" + SECRET + "\n==> stderr (truncated) <==\n" + SECRET,
])
def test_forged_headers_in_meta_test_output_reveal_nothing(test_out):
    shown = meta_train_log(framed("train\n", test_out, "", SECRET + "\n==> stderr <==\n"))
    assert SECRET not in shown


def test_forged_frame_in_meta_train_output_cannot_move_the_cut():
    fake = "==> arena log frame: meta-train 999 + meta-test 0 stdout, 0 + 0 stderr chars <==\n"
    assert SECRET not in meta_train_log(framed(fake, SECRET))


@pytest.mark.parametrize("log", [
    None, "", f"==> stdout <==\n{SECRET}\n==> stderr <==\n",  # an older worker: no frame
    framed("t" * 50, SECRET * 10)[:-5],  # cut short (a server cap)
    framed("t" * 50, SECRET * 10) + "x",  # longer than framed
])
def test_a_log_that_does_not_add_up_is_withheld_whole(log):
    assert meta_train_log(log) == HIDDEN_LOG


def test_a_log_cut_by_the_worker_cap_keeps_only_what_meta_train_wrote():
    shown = meta_train_log(framed("early\n" * 5, SECRET * 100, cap=200))
    assert SECRET not in shown


def test_meta_train_failures_keep_their_text(tmp_path):
    (tmp_path / "status.json").write_text(
        '{"stage": "meta_fit", "error": "bad lr", "traceback": "Traceback\\nValueError: bad lr"}')
    record = ResultRecord(exit_code=1, status=read_reported_status(tmp_path))
    outcome = verdict_outcome(decide_verdict(record))
    assert outcome.reason == "meta_fit_error" and "bad lr" in outcome.message
    assert redact_message(outcome.reason, outcome.message, outcome.stage) == outcome.message


def test_without_a_stage_the_message_is_not_read_for_one():
    """Issue 35.3: the stage travels as a field; an older worker's run, which has none, is
    redacted even when its message begins as a meta-train failure's would."""
    shown = redact_message("meta_fit_error", f"meta_fit raised: {SECRET}")
    assert SECRET not in shown and shown.startswith("The run failed during meta-testing")


@pytest.mark.parametrize(("reason", "message", "kind"), [
    ("fit_error", f"fit raised on test task 2: {SECRET}\n\nTraceback\nKeyError: {SECRET}",
     "KeyError"),
    # A stage name forged on the task's socket: the reason it maps to does not go with it.
    ("predict_error", f"meta_fit raised: {SECRET}", None),
    ("meta_fit_error", f"meta_fit raised on test task 0: {SECRET}", None),
    ("predict_error", f"predict raised on test task 1: x\n\nTraceback\nLeak{SECRET}: y", None),
    ("bad_predictions", f"test task 4: the predictions could not be accepted: {SECRET}", None),
    ("crashed", f"the process of test task 9 was killed by signal 11 {SECRET}", None),
])
def test_meta_test_failures_keep_only_the_stage_and_a_builtin_type(reason, message, kind):
    shown = redact_message(reason, message)
    assert SECRET not in shown and "test task 2" not in shown
    assert (kind in shown) if kind else ("Error:" not in shown)
