"""Score: what the participant side did, mapped to the run's state, reason, message and log."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from submission_api.runner.scorer import ParticipantFailure, ScoredRun
from submission_api.scoring import TaskRecord
from worker.pipeline.execute import ExecutionResult
from worker.pipeline.score import Outcome, decide_outcome, format_log

CLEAN = ExecutionResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=12.0,
                        stdout="hello", stderr="")
RECORD = TaskRecord(id=0, dataset="d", group="test", n_ways=5, n_shots=1, score=0.5,
                    accuracy=0.6, worst_class_accuracy=0.2)


def scored_ok(output_dir: Path, answers_dir: Path, duration_s: float | None = None) -> ScoredRun:
    return ScoredRun(summary={"mean": 0.5, "duration_s": duration_s}, records=[RECORD])


def must_not_score(*args: object, **kwargs: object) -> ScoredRun:
    raise AssertionError("score_output must not run for this result")


def write_status(output_dir: Path, **status: object) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    full = {"stage": None, "error": None, "traceback": None, "task": None, **status}
    (output_dir / "status.json").write_text(json.dumps(full))


def decide(result: ExecutionResult, tmp_path: Path, score=must_not_score) -> Outcome:
    return decide_outcome(result, tmp_path / "output", tmp_path / "answers",
                          score_output=score, log_cap_bytes=1024)


def test_clean_exit_is_scored_and_finished_with_records(tmp_path: Path):
    outcome = decide(CLEAN, tmp_path, score=scored_ok)
    assert (outcome.state, outcome.reason) == ("finished", None)
    assert outcome.summary == {"mean": 0.5, "duration_s": 12.0}
    assert outcome.tasks == [RECORD.to_dict()]
    assert "hello" in outcome.log


@pytest.mark.parametrize(("changes", "state", "reason"), [
    ({"timed_out": True, "exit_code": 137}, "timed_out", "time_limit"),
    ({"oom_killed": True, "exit_code": 137}, "failed", "out_of_memory"),
    ({"output_exceeded": True, "exit_code": 1}, "failed", "bad_predictions"),
    ({"timed_out": True, "oom_killed": True}, "timed_out", "time_limit"),
])
def test_limits_hit_decide_the_outcome_whatever_the_exit_code(tmp_path, changes, state, reason):
    outcome = decide(replace(CLEAN, **changes), tmp_path)
    assert (outcome.state, outcome.reason) == (state, reason)
    assert outcome.message and outcome.summary == {} and outcome.tasks == []


@pytest.mark.parametrize(("stage", "task", "reason"), [
    ("import", None, "import_error"),
    ("meta_fit", None, "meta_fit_error"),
    ("save", None, "meta_fit_error"),
    ("load", 3, "fit_error"),
    ("fit", 3, "fit_error"),
    ("predict", 4, "predict_error"),
])
def test_exit_1_is_attributed_to_the_reported_stage_with_its_traceback(tmp_path, stage, task,
                                                                        reason):
    write_status(tmp_path / "output", stage=stage, error="boom", task=task,
                 traceback="Traceback (most recent call last):\n  ValueError: boom")
    outcome = decide(replace(CLEAN, exit_code=1, stderr="[arena] ValueError"), tmp_path)
    assert (outcome.state, outcome.reason) == ("failed", reason)
    assert "boom" in outcome.message and "Traceback" in outcome.message
    if task is not None:
        assert f"task {task}" in outcome.message
    assert "[arena] ValueError" in outcome.log


def test_crash_without_reported_error_still_names_the_stage(tmp_path: Path):
    write_status(tmp_path / "output", stage="meta_fit")
    outcome = decide(replace(CLEAN, exit_code=139), tmp_path)
    assert (outcome.state, outcome.reason) == ("failed", "meta_fit_error")
    assert "139" in outcome.message


@pytest.mark.parametrize("status_text", [None, "{not json", "[1, 2]"])
def test_exit_without_a_readable_status_is_an_import_error(tmp_path, status_text):
    output = tmp_path / "output"
    output.mkdir()
    if status_text is not None:
        (output / "status.json").write_text(status_text)
    outcome = decide(replace(CLEAN, exit_code=2), tmp_path)
    assert (outcome.state, outcome.reason) == ("failed", "import_error")


def test_status_json_as_a_link_is_not_followed(tmp_path: Path):
    output = tmp_path / "output"
    output.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"stage": "predict", "error": "LEAKED"}))
    (output / "status.json").symlink_to(secret)
    outcome = decide(replace(CLEAN, exit_code=1), tmp_path)
    assert "LEAKED" not in outcome.message


def test_missing_or_bad_predictions_fail_with_the_scorers_category(tmp_path: Path):
    def score(*args: object, **kwargs: object) -> ScoredRun:
        raise ParticipantFailure("bad_predictions", "task 0: no readable predictions file")
    outcome = decide(CLEAN, tmp_path, score=score)
    assert (outcome.state, outcome.reason) == ("failed", "bad_predictions")
    assert "task 0" in outcome.message


def test_huge_traceback_is_cut_to_fit_the_servers_message_limit(tmp_path: Path):
    write_status(tmp_path / "output", stage="fit", error="e" * 50_000,
                 traceback="frame\n" * 10_000 + "LastError: here")
    outcome = decide(replace(CLEAN, exit_code=1), tmp_path)
    assert len(outcome.message) <= 20_000
    assert outcome.message.startswith("fit raised") and outcome.message.endswith("LastError: here")


def test_log_keeps_the_tail_of_each_stream_and_marks_cuts():
    result = replace(CLEAN, stdout="a" * 50 + "END", stderr="err", stderr_truncated=True)
    log = format_log(result, cap_bytes=10)
    assert "==> stdout (truncated) <==\naaaaaaaEND" in log
    assert "==> stderr (truncated) <==\nerr" in log


def test_finish_body_carries_the_fencing_token_and_every_field():
    body = Outcome("failed", "fit_error", "m", log="l",
                   meta_train_log="t").to_finish_body(fencing_token=4)
    assert body == {"fencing_token": 4, "state": "failed", "reason": "fit_error", "message": "m",
                    "summary": {}, "tasks": [], "log": "l", "isolation": None, "usage": None,
                    "stage": None, "meta_train_log": "t"}


def test_every_outcome_of_a_two_stage_run_sends_meta_trains_part_apart(tmp_path: Path):
    """Issue 35.3: the stage split travels as the finish body's own field, cut where the
    executor counted meta-train's characters, for a scored run and a failed one alike."""
    two = replace(CLEAN, stdout="train\nTEST\n", stderr="warn\nTESTERR\n",
                  meta_train_chars=(len("train\n"), len("warn\n")))
    for outcome in (decide(two, tmp_path, score=scored_ok),
                    decide(replace(two, exit_code=1), tmp_path)):
        train = outcome.to_finish_body(fencing_token=1)["meta_train_log"]
        assert "train" in train and "warn" in train and "TEST" not in train
        assert "TEST" in outcome.log
    assert decide(CLEAN, tmp_path, score=scored_ok).meta_train_log is None


def test_finish_body_validates_against_the_servers_schema(tmp_path: Path):
    from pydantic import TypeAdapter

    from server.schemas.internal import FinishRequest

    finished = decide(CLEAN, tmp_path, score=scored_ok).to_finish_body(fencing_token=2)
    parsed = TypeAdapter(FinishRequest).validate_python(finished)
    assert parsed.tasks[0].id == RECORD.id and parsed.state == "finished"
    write_status(tmp_path / "output", stage="predict", error="x", traceback="t" * 100_000)
    failed = decide(replace(CLEAN, exit_code=1), tmp_path).to_finish_body(fencing_token=2)
    assert TypeAdapter(FinishRequest).validate_python(failed).reason == "predict_error"


@pytest.mark.parametrize("name", ["status.json", "predictions/task_00000.npy"])
def test_a_fifo_in_the_output_is_refused_without_blocking_the_scorer(tmp_path, name):
    """Issue 13 (4): opening a FIFO O_RDONLY blocks until a writer comes, i.e. forever."""
    import os
    import threading

    from submission_api.runner.scorer import score_output

    output = tmp_path / "output"
    (output / "predictions").mkdir(parents=True)
    os.mkfifo(output / name)
    answers = tmp_path / "answers"
    answers.mkdir()
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(decide(CLEAN, tmp_path, score_output)),
                              daemon=True)
    thread.start()
    thread.join(20.0)
    assert not thread.is_alive(), "the scorer blocked on a FIFO"
    assert seen and seen[0].state == "failed"


def test_scoring_that_outlives_its_bound_is_the_participants_outcome(tmp_path):
    import threading

    from worker.pipeline.score import score_within

    release = threading.Event()

    def stalls(output_dir: Path, answers_dir: Path, duration_s: float | None = None) -> None:
        release.wait(30.0)

    with pytest.raises(ParticipantFailure) as caught:
        score_within(stalls, tmp_path, tmp_path, 1.0, timeout_s=0.2)
    release.set()
    assert caught.value.reason == "bad_predictions" and "took more than" in caught.value.message
