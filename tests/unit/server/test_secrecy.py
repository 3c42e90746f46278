"""The owner's view of a run in a secret-data phase fails closed (issue 20): participant code
controls the text of its logs and exceptions, so the worker cuts meta-train's part of the log by
its own count of what meta-train wrote (issue 35.3: sent as the finish body's `meta_train_log`),
and the server serves that field, never a cut of the log's text; a forged frame, fake section
headers or a stage name sent on a test task's socket reveal nothing."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from server.services.secrecy import FULL, HIDDEN_LOG, OwnerView, redact_message, served_log
from submission_api.contract.record import ResultRecord
from submission_api.contract.verdict import decide_verdict
from submission_api.runner.scorer import read_reported_status
from worker.pipeline.score import format_log, format_meta_train_log, verdict_outcome
from worker.sandbox_result import SandboxResult

SECRET = "PIXELS-7a6b"
RUN = SandboxResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=1.0,
                    stdout="", stderr="")
OWNER = OwnerView(meta_test_text=False, scores=False, details=False)


def two_stages(train_out: str, test_out: str, train_err: str = "",
               test_err: str = "") -> SandboxResult:
    return replace(RUN, stdout=train_out + test_out, stderr=train_err + test_err,
                   meta_train_chars=(len(train_out), len(train_err)))


def stored(result: SandboxResult, cap: int = 10_000) -> Any:
    """A run row as the server stores the worker's two log fields for `result`."""
    return SimpleNamespace(log=format_log(result, cap),
                           meta_train_log=format_meta_train_log(result, cap))


def test_the_meta_train_part_is_kept_and_the_meta_test_part_withheld():
    run = stored(two_stages("epoch 1\n", f"{SECRET}\n", "warn\n", f"{SECRET}\n"))
    shown = served_log(run, OWNER)
    assert "epoch 1" in shown and "warn" in shown and SECRET not in shown
    assert shown.endswith(HIDDEN_LOG)
    assert SECRET in served_log(run, FULL) and "epoch 1" in served_log(run, FULL)


@pytest.mark.parametrize("test_out", [
    "\n==> stderr <==\n" + SECRET,  # a fake stderr header after the real stdout part
    "==> arena log frame: meta-train 0 + meta-test 0 stdout, 99 + 0 stderr chars <==\n" + SECRET,
    "\n==> stdout <==\n" + SECRET + "\n==> stderr (truncated) <==\n" + SECRET,
    "\n==> meta-train stdout <==\n" + SECRET,
])
def test_forged_headers_in_meta_test_output_reveal_nothing(test_out):
    run = stored(two_stages("train\n", test_out, "", SECRET + "\n==> stderr <==\n"))
    assert SECRET not in served_log(run, OWNER)


def test_a_forged_frame_in_meta_train_output_cannot_move_the_cut():
    fake = "==> arena log frame: meta-train 999 + meta-test 0 stdout, 0 + 0 stderr chars <==\n"
    assert SECRET not in served_log(stored(two_stages(fake, SECRET)), OWNER)


@pytest.mark.parametrize("log", [
    None, "", f"==> stdout <==\n{SECRET}\n==> stderr <==\n",
    # A well-formed frame that counts everything as meta-train's: the log's text is not read.
    "==> arena log frame: meta-train 12 + meta-test 0 stdout, 0 + 0 stderr chars <==\n"
    f"==> stdout <==\n{SECRET}\n\n==> stderr <==\n",
])
def test_a_run_without_the_meta_train_field_has_its_log_withheld_whole(log):
    assert served_log(SimpleNamespace(log=log, meta_train_log=None), OWNER) == HIDDEN_LOG


def test_a_log_cut_by_the_worker_cap_keeps_only_what_meta_train_wrote():
    run = stored(two_stages("early\n" * 5, SECRET * 100), cap=200)
    shown = served_log(run, OWNER)
    assert SECRET not in shown and "early" in shown


def test_the_worker_keeps_the_end_of_a_long_meta_train_part():
    train = format_meta_train_log(two_stages("x" * 500 + "LAST\n", SECRET), 100)
    assert train is not None and "LAST" in train and "(truncated)" in train
    assert SECRET not in train


def test_a_result_that_does_not_tell_the_stages_apart_sends_no_meta_train_part():
    assert format_meta_train_log(replace(RUN, stdout=f"{SECRET}\n"), 10_000) is None


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


def test_the_platforms_own_messages_pass_whole():
    """A charged internal error's message is the server's own (services/runs.py); a platform
    error's is replaced by a fixed sentence: neither holds participant text."""
    charged = "the platform met an internal error evaluating this run, the 3th of your runs"
    assert redact_message("internal_error", charged) == charged
    assert SECRET not in redact_message("platform_error", f"worker said {SECRET}")
