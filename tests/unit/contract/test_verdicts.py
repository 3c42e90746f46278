"""One verdict for one result record: the worker (`worker.pipeline.score`) and `arena run`
(`submission_api.runner.local`) build their records from the same files and reach the same
verdict through `submission_api.contract.verdict.decide_verdict`.

The table holds every hostile case of the adversarial suite (tests/adversarial/, read here from
its source so that a case added there without one here fails) and the kills of issue 21: a
SIGKILL is out of memory only on evidence; the supervisor killed from outside is a platform
fault; a non-zero exit after meta-training finished is a crash, not an import error.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from submission_api.contract.reasons import STORED_REASONS, FailureReason
from submission_api.contract.verdict import Verdict, VerdictKind, decide_verdict
from submission_api.runner import local
from submission_api.runner.scorer import ScoredRun
from worker.pipeline.errors import PlatformFault
from worker.pipeline.execute import ExecutionResult
from worker.pipeline.faults import INTERNAL_ERROR_FLAG
from worker.pipeline.score import build_record, decide_outcome

ADVERSARIAL = Path(__file__).parents[2] / "adversarial" / "test_adversarial_submissions.py"
K = VerdictKind
R = FailureReason


@dataclass(frozen=True)
class Facts:
    """What happened, told once; each side turns it into its own executor's raw result."""

    exit: int = 0
    signal: int | None = None
    timed_out: bool = False
    oom: bool = False
    output_exceeded: bool = False
    status: dict[str, Any] | str | None = None
    """status.json: an object, raw text, or None for no file."""
    meta_test: dict[str, Any] | None = None
    """answers/meta_test.json (the task server's report), None when meta-test never started."""
    stderr: str = "some output\n"


@dataclass(frozen=True)
class Case:
    facts: Facts
    kind: VerdictKind
    reason: FailureReason | None
    words: tuple[str, ...] = ()
    adversarial: str | None = None
    """The adversarial suite's case this row stands for."""


DONE = {"stage": "done"}


def task_failure(reason: str, message: str, task: int | None = 0, **more: Any) -> dict[str, Any]:
    return {"tasks_done": 0, "n_tasks": 3, "failed_task": task, "reason": reason,
            "stage": more.pop("stage", "predict"), "message": message, "traceback": None,
            "isolation": "landlock", "seconds": 1.0, **more}


ANSWERED = {"tasks_done": 3, "n_tasks": 3, "failed_task": None, "reason": None, "stage": None,
            "message": None, "traceback": None, "isolation": "landlock", "seconds": 1.0}

CASES: dict[str, Case] = {
    "probe_network_writes_secrets": Case(Facts(status=DONE, meta_test=ANSWERED), K.SCORE, None,
                                         adversarial="probe_network_writes_secrets"),
    "fork_bomb": Case(Facts(exit=1, status={"stage": "meta_fit", "error": "fork bomb contained: "
                                            "os.fork refused"}),
                      K.FAILED, R.META_FIT_ERROR, ("meta_fit", "fork bomb contained", "refused"),
                      adversarial="fork_bomb"),
    "memory_bomb": Case(Facts(exit=1, signal=9, oom=True, status={"stage": "meta_fit"}),
                        K.FAILED, R.OUT_OF_MEMORY, ("memory limit",), adversarial="memory_bomb"),
    "fill_output": Case(Facts(exit=1, output_exceeded=True, status={"stage": "meta_fit"}),
                        K.FAILED, R.BAD_PREDICTIONS, ("output folder exceeded its size limit",),
                        adversarial="fill_output"),
    "flooded_stdout_and_binary_stderr": Case(Facts(status=DONE, meta_test=ANSWERED,
                                                   stderr="\ufffd" * 100), K.SCORE, None,
                                             adversarial="flooded_stdout_and_binary_stderr"),
    "endless_meta_fit": Case(Facts(exit=1, signal=9, timed_out=True, status={"stage": "meta_fit"}),
                             K.TIMED_OUT, R.TIME_LIMIT, ("wall-clock limit",),
                             adversarial="endless_meta_fit"),
    "endless_fit": Case(Facts(exit=1, signal=9, timed_out=True, status=DONE),
                        K.TIMED_OUT, R.TIME_LIMIT, ("wall-clock limit",),
                        adversarial="endless_fit"),
    "endless_predict": Case(Facts(exit=1, signal=9, timed_out=True, status=DONE,
                                  meta_test=task_failure("crashed", "stopped answering")),
                            K.TIMED_OUT, R.TIME_LIMIT, ("wall-clock limit",),
                            adversarial="endless_predict"),
    # Meta-train runs participant code in its own process: its SIGKILL may be its own doing.
    "signals_to_parent": Case(Facts(exit=1, signal=9, status={"stage": "meta_fit"}),
                              K.FAILED, R.META_FIT_ERROR,
                              ("meta_fit", "exit code 137", "without reporting an error"),
                              adversarial="signals_to_parent"),
    "symlinks_out_of_output": Case(Facts(status=DONE, meta_test=ANSWERED), K.SCORE, None,
                                   adversarial="symlinks_out_of_output"),
    "pickled_predictions": Case(Facts(status=DONE, meta_test=task_failure(
        "bad_predictions", "test task 0: the predictions could not be accepted: object arrays "
        "are not allowed")), K.FAILED, R.BAD_PREDICTIONS, ("test task 0", "not allowed"),
        adversarial="pickled_predictions"),
    "huge_predictions": Case(Facts(status=DONE, meta_test=task_failure(
        "bad_predictions", "test task 0: the predictions could not be accepted: payload over "
        "480 bytes")), K.FAILED, R.BAD_PREDICTIONS, ("test task 0", "payload over"),
        adversarial="huge_predictions"),
    "os_exit_mid_run": Case(Facts(exit=3, status={"stage": "meta_fit"}, stderr=""),
                            K.FAILED, R.META_FIT_ERROR, ("meta_fit", "exit code 3", "stderr is "
                                                         "empty"),
                            adversarial="os_exit_mid_run"),
    "crash_at_import": Case(Facts(exit=1, status={"stage": "import", "error": "RuntimeError: "
                                                  "boom at import", "traceback": "Traceback"}),
                            K.FAILED, R.IMPORT_ERROR, ("import", "boom at import", "Traceback"),
                            adversarial="crash_at_import"),
    # Issue 21: kills told apart by evidence.
    "test_task_killed_from_the_host": Case(
        Facts(status=DONE, meta_test=task_failure("killed", "the process of test task 1 was "
                                                  "killed by signal 9 without sending valid "
                                                  "predictions", task=1, stage="meta_test")),
        K.UNEXPLAINED, R.PLATFORM_ERROR, ("test task 1", "not charged")),
    "test_task_killed_by_the_memory_limit": Case(
        Facts(exit=0, oom=True, status=DONE,
              meta_test=task_failure("killed", "the process of test task 1 was killed by signal "
                                     "9", task=1, stage="meta_test")),
        K.FAILED, R.OUT_OF_MEMORY, ("memory limit",)),
    "supervisor_killed_between_tasks": Case(Facts(exit=1, signal=9, status=DONE),
                                            K.UNEXPLAINED, R.PLATFORM_ERROR, ("supervisor",)),
    "supervisor_killed_while_a_task_ran": Case(
        Facts(exit=1, signal=9, status=DONE,
              meta_test=task_failure("crashed", "the meta-test side stopped answering", task=None,
                                     stage="meta_test")),
        K.UNEXPLAINED, R.PLATFORM_ERROR, ("supervisor", "not charged")),
    "supervisor_killed_by_the_memory_limit": Case(Facts(exit=1, signal=9, oom=True, status=DONE),
                                                  K.FAILED, R.OUT_OF_MEMORY, ("memory limit",)),
    "non_zero_exit_after_done_is_a_crash": Case(
        Facts(exit=1, status=DONE), K.FAILED, R.CRASHED,
        ("exited with code 1", "after meta-training finished")),
    "a_test_task_segfaults": Case(
        Facts(status=DONE, meta_test=task_failure("crashed", "the process of test task 2 was "
                                                  "killed by signal 11", task=2)),
        K.FAILED, R.CRASHED, ("test task 2",)),
    "fit_raises_on_a_task": Case(
        Facts(status=DONE, meta_test=task_failure("fit_error", "fit raised on test task 0: boom",
                                                  stage="fit", traceback="Traceback: frames")),
        K.FAILED, R.FIT_ERROR, ("fit raised", "Traceback: frames")),
    "status_json_of_the_wrong_shape": Case(Facts(exit=1, status={"stage": ["x"]}),
                                           K.FAILED, R.BAD_PREDICTIONS, ("status.json",)),
    "no_status_at_all": Case(Facts(exit=2), K.FAILED, R.IMPORT_ERROR, ("before reporting",)),
    "unreadable_status": Case(Facts(exit=2, status="{not json"), K.FAILED, R.IMPORT_ERROR),
    "died_between_test_tasks": Case(Facts(exit=1, status={"stage": "meta_test"}),
                                    K.FAILED, R.PREDICT_ERROR, ("meta-testing",)),
    "timed_out_beats_out_of_memory": Case(Facts(exit=1, signal=9, timed_out=True, oom=True),
                                          K.TIMED_OUT, R.TIME_LIMIT),
    "a_clean_exit_with_every_task_answered_is_scored": Case(
        Facts(status=DONE, meta_test=ANSWERED), K.SCORE, None),
}


def write_files(facts: Facts, tmp_path: Path) -> tuple[Path, Path]:
    output, answers = tmp_path / "output", tmp_path / "answers"
    output.mkdir(parents=True)
    answers.mkdir(parents=True)
    if isinstance(facts.status, str):
        (output / "status.json").write_text(facts.status)
    elif facts.status is not None:
        (output / "status.json").write_text(json.dumps(facts.status))
    if facts.meta_test is not None:
        (answers / "meta_test.json").write_text(json.dumps(facts.meta_test))
    return output, answers


def worker_result(facts: Facts) -> ExecutionResult:
    """As the Docker sandbox reports it: its init exits 128 + n for a death by signal n."""
    code = 128 + facts.signal if facts.signal is not None else facts.exit
    return ExecutionResult(exit_code=code, oom_killed=facts.oom, timed_out=facts.timed_out,
                           wall_time_s=5.0, stdout="", stderr=facts.stderr,
                           output_exceeded=facts.output_exceeded)


def arena_stage(facts: Facts) -> local.StageRun:
    """As `arena run` sees it: `subprocess` gives -n for a death by signal n."""
    code = -facts.signal if facts.signal is not None else facts.exit
    return local.StageRun(code, facts.timed_out, 5.0, oom_killed=facts.oom,
                          stderr_empty=not facts.stderr.strip())


def worker_verdict(facts: Facts, tmp_path: Path) -> Verdict:
    output, answers = write_files(facts, tmp_path / "worker")
    record = build_record(worker_result(facts), output, answers, time_limit_s=60.0)
    return decide_verdict(record)


def arena_verdict(facts: Facts, tmp_path: Path) -> Verdict:
    if facts.output_exceeded:
        pytest.skip("arena run bounds no output folder")
    output, answers = write_files(facts, tmp_path / "arena")
    return decide_verdict(local.build_record(arena_stage(facts), output, answers, 60.0))


@pytest.mark.parametrize("name", list(CASES))
def test_the_worker_reaches_the_documented_verdict(name, tmp_path):
    case = CASES[name]
    verdict = worker_verdict(case.facts, tmp_path)
    assert (verdict.kind, verdict.reason) == (case.kind, case.reason), verdict
    for word in case.words:
        assert word in verdict.full_message(), (word, verdict)


@pytest.mark.parametrize("name", list(CASES))
def test_arena_run_reaches_the_same_verdict_as_the_worker(name, tmp_path):
    facts = CASES[name].facts
    assert arena_verdict(facts, tmp_path) == worker_verdict(facts, tmp_path)


def scored(*_: object, **__: object) -> ScoredRun:
    return ScoredRun(summary={"mean": 0.5})


@pytest.mark.parametrize("name", list(CASES))
def test_what_each_side_reports_is_the_verdict(name, tmp_path):
    """The worker publishes the verdict (a platform one is released, never published) and
    `arena run` reports it in the same state and reason."""
    case = CASES[name]
    output, answers = write_files(case.facts, tmp_path)
    decide = lambda: decide_outcome(worker_result(case.facts), output, answers,  # noqa: E731
                                    score_output=scored, log_cap_bytes=1024)
    if case.kind is K.PLATFORM:
        with pytest.raises(PlatformFault, match="not charged"):
            decide()
        return
    outcome = decide()
    if case.kind is K.UNEXPLAINED:
        # A kill nobody can be shown to have sent (the participant's code could have): ended
        # now, uncharged, never retried, flagged for the server's daily allowance.
        assert (outcome.state, outcome.reason) == ("failed", "platform_error")
        assert outcome.summary.get(INTERNAL_ERROR_FLAG) is True
        assert "not charged" in outcome.message
        return
    expected_state = "finished" if case.kind is K.SCORE else str(case.kind)
    assert (outcome.state, outcome.reason) == (expected_state, case.reason and str(case.reason))
    if case.kind is not K.SCORE and not case.facts.output_exceeded:
        reported = local._result(decide_verdict(local.build_record(
            arena_stage(case.facts), output, answers, 60.0)), output)
        assert (reported.state, reported.reason) == (outcome.state, outcome.reason)


def adversarial_cases() -> dict[str, tuple[str, str | None]]:
    """`CASES` of the adversarial suite, name -> (state, reason), read from its source."""
    tree = ast.parse(ADVERSARIAL.read_text())
    for node in tree.body:
        if (isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict)
                and "CASES" in ast.unparse(node)):
            found = {}
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                assert isinstance(key, ast.Constant) and isinstance(value, ast.Call)
                state, reason = (ast.literal_eval(arg) for arg in value.args[1:3])
                found[key.value] = (state, reason)
            return found
    raise AssertionError(f"no CASES table in {ADVERSARIAL}")


def test_every_hostile_case_of_the_adversarial_suite_has_a_row_with_its_verdict():
    rows = {case.adversarial: case for case in CASES.values() if case.adversarial}
    cases = adversarial_cases()
    assert set(cases) <= set(rows), sorted(set(cases) - set(rows))
    for name, (state, reason) in cases.items():
        row = rows[name]
        expected = ("finished", None) if row.kind is K.SCORE else (str(row.kind), row.reason)
        assert (state, reason) == expected, name


def test_every_stored_reason_is_explained_on_the_submission_page():
    from server.web.failure import REASONS, explain_failure

    assert set(REASONS) == set(STORED_REASONS)
    timed_out = explain_failure("timed_out", "the run exceeded its wall-clock limit")
    time_limit = explain_failure(str(R.TIME_LIMIT), "the run exceeded its wall-clock limit")
    assert timed_out is not None and time_limit is not None
    assert timed_out.meaning == time_limit.meaning != "The run failed."



def test_a_platform_error_the_trusted_side_records_in_meta_test_is_retried_not_charged():
    """Issue 36.1: a lost fork server or task reaper (platform code the task cannot reach)
    ends meta-test as `platform_error`; the verdict was a charged `failed` with that reason."""
    from submission_api.contract.record import MetaTestEnd, ReportedStatus, ResultRecord
    from submission_api.contract.verdict import VerdictKind, decide_verdict

    record = ResultRecord(exit_code=0, status=ReportedStatus(stage="meta_test"),
                          meta_test=MetaTestEnd(tasks_done=0, n_tasks=5, reason="platform_error",
                                                message="the fork server (platform code) ended "
                                                        "before it was ready"))
    verdict = decide_verdict(record)
    assert verdict.kind == VerdictKind.PLATFORM and not verdict.charged
